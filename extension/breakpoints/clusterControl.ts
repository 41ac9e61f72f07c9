// raySleuth.continueAll and raySleuth.pauseRank: run on or stop workers by rank
// through the broker (POST /v1/continue, /v1/pause), with or without sessions.
import * as vsapi from "../common/vscodeapi";
import { log } from "../common/log";
import { ClusterState } from "../cluster/clusterState";
import { pickRanks } from "../cluster/rankPicker";
import { formatRanks } from "../common/ranks";
import { SkippedWorker } from "../broker/types";
import type { BrokerAccess } from "../broker/brokerConnection";

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Tells the user which workers the broker left alone and why, in one message. */
function reportSkipped(what: string, skipped: SkippedWorker[] | undefined): void {
  if (!skipped?.length) {
    return;
  }
  const text = skipped.map((s) => `${s.worker.slice(0, 8)}: ${s.reason}`).join("; ");
  log.warn(`${what} skipped ${skipped.length} worker(s): ${text}`);
  void vsapi.showWarningMessage(`Ray Sleuth: ${what} left ${skipped.length} worker${skipped.length === 1 ? "" : "s"} as they were: ${text}`);
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
      const { continued, skipped } = await client.continueWorkers({});
      reportSkipped("continue", skipped);
      const n = continued?.length ?? 0;
      log.info(`Continued ${n} paused worker(s): ${(continued ?? []).join(", ")}`);
      if (n === 0 && !skipped?.length) {
        void vsapi.showInformationMessage("Ray Sleuth: no worker is paused.");
      } else {
        vsapi.setStatusBarMessage(`Ray Sleuth: ${n} worker${n === 1 ? "" : "s"} continued`, 5000);
      }
      return continued ?? [];
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
      const { paused, skipped } = await client.pauseWorkers({ ranks: chosen });
      reportSkipped("pause", skipped);
      log.info(`Paused rank(s) ${formatRanks(chosen)}: ${(paused ?? []).join(", ")}`);
      if (!paused?.length && !skipped?.length) {
        void vsapi.showInformationMessage(`Ray Sleuth: no running worker with rank ${formatRanks(chosen)} to pause.`);
      }
      return paused ?? [];
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: pausing rank ${formatRanks(chosen)} failed: ${describe(err)}`);
      return undefined;
    }
  }
}
