// raySleuth.showTimeline: the cluster's timeline (GET /v1/events) in a chart
// webview, one lane per rank (steps, crashes, stops, inspect points, suspected
// hangs), read again while it is open; raySleuth.exportPerfetto writes the same
// events as a Chrome trace-event file that Perfetto opens.
import * as path from "path";
import * as vscode from "vscode";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { getEvents } from "../broker/telemetryClient";
import { TimelineEvent } from "../broker/types";
import { TimelineModel } from "../webview/protocol";
import { ChartPanel } from "./chartPanel";
import { toChromeTrace } from "./perfettoTrace";
import { mergeEvents, timelineModel } from "./timelineModel";

export const TIMELINE_VIEW_TYPE = "raySleuth.timeline";

/** How often an open timeline asks for new events (step events are not streamed). */
const POLL_MS = 2000;
/** Stream events that mean a new timeline entry: read again soon. */
const NEWS = new Set(["crash", "hang", "inspect", "workers"]);

export class TimelineService implements vscode.Disposable {
  chart: ChartPanel | undefined;
  /** The model shown now (tests read it). */
  model: TimelineModel | undefined;
  private events: TimelineEvent[] = [];
  private poll: ReturnType<typeof setInterval> | undefined;
  private soon: ReturnType<typeof setTimeout> | undefined;
  private reading = false;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly connection: BrokerConnectionService,
    private readonly extensionUri: vscode.Uri,
  ) {
    this.disposables.push(
      connection.onStreamEvent((e) => {
        if (this.chart && NEWS.has(e.event) && this.soon === undefined) {
          this.soon = setTimeout(() => {
            this.soon = undefined;
            void this.read();
          }, 300);
        }
      }),
      // Connected again: the broker may have restarted, and it numbers its events anew.
      connection.onDidConnect(() => {
        this.events = [];
        if (this.chart) {
          void this.read(true);
        }
      }),
    );
  }

  async show(): Promise<ChartPanel | undefined> {
    if (!(await this.connection.ensureClient())) {
      return undefined;
    }
    if (!this.chart) {
      const chart = new ChartPanel(TIMELINE_VIEW_TYPE, "Ray Sleuth timeline", this.extensionUri);
      this.chart = chart;
      chart.onDidClose(() => {
        this.chart = undefined;
        this.stopPolling();
      });
      this.poll = setInterval(() => void this.read(), POLL_MS);
    }
    await this.read(true);
    this.chart?.reveal();
    return this.chart;
  }

  /** Reads the events after the last one seen and redraws (`always`: redraw even without new ones). */
  private async read(always = false): Promise<void> {
    const client = this.connection.client;
    if (!client || this.reading || this.connection.status !== "connected") {
      return; // a broker that does not answer is not polled; onDidConnect reads again
    }
    this.reading = true;
    try {
      const since = this.events.length ? this.events[this.events.length - 1].seq : 0;
      const fresh = await getEvents(client, since);
      const before = this.events.length;
      this.events = mergeEvents(this.events, fresh);
      if (always || this.events.length !== before || this.model?.spans.some((s) => s.t1 === null)) {
        this.model = timelineModel(this.events, Date.now() / 1000);
        this.chart?.show(this.model);
      }
    } catch (err) {
      swallow("Reading the timeline", err);
    } finally {
      this.reading = false;
    }
  }

  /**
   * Writes every event the broker keeps as a Chrome trace-event JSON file (Perfetto, chrome://tracing);
   * `target`: a file path or Uri (tests), else a save dialog. Returns the file written.
   */
  async exportPerfetto(target?: unknown): Promise<string | undefined> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    // A menu may pass what it was opened on (an editor's resource): only a .json file is a target.
    const given = target instanceof vscode.Uri ? target : typeof target === "string" ? vscode.Uri.file(target) : undefined;
    let uri = given?.scheme === "file" && given.path.endsWith(".json") ? given : undefined;
    if (!uri) {
      const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
      uri = await vscode.window.showSaveDialog({
        title: "Ray Sleuth: export the timeline for Perfetto",
        defaultUri: folder ? vscode.Uri.joinPath(folder, "raysleuth-trace.json") : undefined,
        filters: { "Trace (JSON)": ["json"] },
      });
      if (!uri) {
        return undefined;
      }
    }
    let events: TimelineEvent[];
    try {
      events = await getEvents(client, 0);
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: reading the timeline failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
    const trace = toChromeTrace(events, `Ray Sleuth broker ${client.url}`);
    await vscode.workspace.fs.writeFile(uri, Buffer.from(JSON.stringify(trace)));
    log.info(`Wrote ${events.length} timeline events to ${uri.fsPath}`);
    void vsapi.showInformationMessage(`Ray Sleuth: wrote ${events.length} events to ${path.basename(uri.fsPath)}; open it at ui.perfetto.dev ("Open trace file") or in chrome://tracing.`);
    return uri.fsPath;
  }

  private stopPolling(): void {
    if (this.poll !== undefined) {
      clearInterval(this.poll);
      this.poll = undefined;
    }
  }

  dispose(): void {
    this.stopPolling();
    if (this.soon !== undefined) {
      clearTimeout(this.soon);
    }
    this.chart?.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
