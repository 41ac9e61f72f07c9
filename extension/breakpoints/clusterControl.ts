// raySleuth.continueAll and raySleuth.pauseRank: run on or stop workers by rank
// through the broker (POST /v1/continue, /v1/pause), with or without sessions.
import * as vsapi from "../common/vscodeapi";
import { log } from "../common/log";
import { ClusterState } from "../cluster/clusterState";
import { pickRanks } from "../cluster/rankPicker";
import { formatRanks } from "../common/ranks";
import { continueReport, ControlReport, pauseReport } from "./controlReport";
import type { BrokerAccess } from "../broker/brokerConnection";

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Shows a report: a warning or a notice as a notification, plain success in the status bar; all in the log. */
export function showReport(report: ControlReport): void {
  log.info(report.text);
  if (report.level === "warning") {
    void vsapi.showWarningMessage(report.text);
  } else if (report.level === "info") {
    void vsapi.showInformationMessage(report.text);
  } else {
    vsapi.setStatusBarMessage(report.text, 8000);
  }
}

export class ClusterControlService {
  constructor(
    private readonly broker: BrokerAccess,
    private readonly state: ClusterState,
  ) {}

  /** Lets every paused worker run on; returns the ids the broker continued. */
  async continueAll(): Promise<string[] | undefined> {
    const client = await this.broker.ensureClient();
    if (!client) {
      return undefined;
    }
    try {
      const reply = await client.continueWorkers({});
      showReport(continueReport(reply, this.state.workers));
      return reply.continued ?? [];
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: continuing the paused workers failed: ${describe(err)}`);
      return undefined;
    }
  }

  /** Stops the workers of the given ranks (asked when not given); returns the ids the broker paused. */
  async pauseRanks(ranks?: number[]): Promise<string[] | undefined> {
    const client = await this.broker.ensureClient();
    if (!client) {
      return undefined;
    }
    const chosen =
      ranks ??
      (await pickRanks(this.state, {
        title: "Ray Sleuth: pause ranks",
        placeHolder: "Tick the ranks to stop where they are",
        filter: (w) => w.agent && w.state !== "paused",
      }));
    if (!chosen || chosen.length === 0) {
      return undefined;
    }
    try {
      const reply = await client.pauseWorkers({ ranks: chosen });
      showReport(pauseReport(reply, `with rank ${formatRanks(chosen)}`, this.state.workers));
      return reply.paused ?? [];
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: pausing rank ${formatRanks(chosen)} failed: ${describe(err)}`);
      return undefined;
    }
  }
}
