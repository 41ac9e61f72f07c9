// raySleuth.showGpuMemory: a chart of GPU memory over time per worker or per
// node (from the Cluster view's context menu, or a pick), fed by GET /v1/gpu
// and then the `gpu` stream events, with the workers' crashes and OOMs marked
// (GET /v1/crashes, `crash` events) and the "growing" stretch highlighted.
import * as vscode from "vscode";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { getCrashes, getGpu } from "../broker/telemetryClient";
import { CrashRecordSummary, GpuRow, WorkerInfo } from "../broker/types";
import { ClusterState } from "../cluster/clusterState";
import { groupWorkers, nodeLabel, workerLabel } from "../cluster/workerGrouping";
import { GpuChartModel } from "../webview/protocol";
import { ChartPanel } from "./chartPanel";
import { formatBytes, mergeGpuRow, nodeChart, workerChart } from "./gpuSeries";

export const GPU_VIEW_TYPE = "raySleuth.gpuMemory";

/** What a chart shows: one worker, or every worker of one node. */
export type GpuTarget = { kind: "worker"; id: string } | { kind: "node"; id: string };

/** How a Cluster view item (or a test) names a target: the tree's node, or a GpuTarget. */
type TargetArg = GpuTarget | { kind: "worker"; worker: WorkerInfo } | { kind: "node"; node: { nodeId: string } } | undefined;

/** Redraws at most this often while samples stream in. */
const REDRAW_MS = 500;

function targetOf(arg: TargetArg): GpuTarget | undefined {
  if (!arg || typeof arg !== "object") {
    return undefined;
  }
  if (arg.kind === "worker") {
    return "worker" in arg ? { kind: "worker", id: arg.worker.id } : arg;
  }
  if (arg.kind === "node") {
    return "node" in arg ? { kind: "node", id: arg.node.nodeId } : arg;
  }
  return undefined;
}

export class GpuService implements vscode.Disposable {
  /** Open charts by `kind:id`. */
  readonly charts = new Map<string, { target: GpuTarget; panel: ChartPanel; model: GpuChartModel | undefined }>();
  /** Every worker's samples seen since the first chart opened. */
  private readonly rows = new Map<string, GpuRow>();
  private crashes: CrashRecordSummary[] = [];
  private redraw: ReturnType<typeof setTimeout> | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly connection: BrokerConnectionService,
    private readonly state: ClusterState,
    private readonly extensionUri: vscode.Uri,
  ) {
    this.disposables.push(
      connection.onStreamEvent((e) => {
        if (!this.charts.size) {
          return;
        }
        if (e.event === "gpu" && e.data && typeof e.data === "object" && Array.isArray((e.data as GpuRow).samples)) {
          const row = e.data as GpuRow;
          this.rows.set(row.worker, mergeGpuRow(this.rows.get(row.worker), row));
          this.scheduleRedraw();
        } else if (e.event === "crash") {
          void this.load(false);
        }
      }),
      connection.onDidConnect(() => {
        if (this.charts.size) {
          void this.load(true); // samples sent while the stream was down
        }
      }),
    );
  }

  /** The command: a Cluster view node or worker, else a pick of them. */
  async show(arg?: unknown): Promise<ChartPanel | undefined> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    await this.load(true);
    const target = targetOf(arg as TargetArg) ?? (await this.pick());
    if (!target) {
      return undefined;
    }
    const key = `${target.kind}:${target.id}`;
    let chart = this.charts.get(key);
    if (!chart) {
      const panel = new ChartPanel(GPU_VIEW_TYPE, "GPU memory", this.extensionUri);
      chart = { target, panel, model: undefined };
      this.charts.set(key, chart);
      panel.onDidClose(() => {
        this.charts.delete(key);
        if (!this.charts.size) {
          this.rows.clear(); // nobody watches: do not keep samples
        }
      });
    }
    this.draw(chart);
    chart.panel.reveal();
    log.info(`GPU memory chart of ${key}`);
    return chart.panel;
  }

  /** The model a chart shows now (tests read it). */
  modelOf(target: GpuTarget): GpuChartModel {
    const worker = this.state.workers.find((w) => w.id === target.id);
    if (target.kind === "worker") {
      const row = this.rows.get(target.id);
      const title = `GPU memory · ${worker ? workerLabel(worker) : row?.rank !== null && row?.rank !== undefined ? `rank ${row.rank}` : target.id.slice(0, 8)}`;
      return workerChart(title, row, this.crashes, worker?.gpu_ids);
    }
    const node = groupWorkers(this.state.workers, this.state.nodes).find((n) => n.nodeId === target.id);
    const ids = new Set(this.state.workers.filter((w) => w.node_id === target.id).map((w) => w.id));
    const rows = [...this.rows.values()].filter((r) => ids.has(r.worker));
    const label = (id: string, rank: number | null) => {
      const w = this.state.workers.find((x) => x.id === id);
      return w ? workerLabel(w) : rank !== null ? `rank ${rank}` : id.slice(0, 8);
    };
    return nodeChart(`GPU memory · ${node ? nodeLabel(node) : `node ${target.id.slice(0, 6)}`}`, rows, this.crashes, label);
  }

  private draw(chart: { target: GpuTarget; panel: ChartPanel; model: GpuChartModel | undefined }): void {
    chart.model = this.modelOf(chart.target);
    chart.panel.show(chart.model);
  }

  private scheduleRedraw(): void {
    if (this.redraw === undefined) {
      this.redraw = setTimeout(() => {
        this.redraw = undefined;
        for (const chart of this.charts.values()) {
          this.draw(chart);
        }
      }, REDRAW_MS);
    }
  }

  /** Reads the samples (`gpu`) and the crash records from the broker; redraws. */
  private async load(gpu: boolean): Promise<void> {
    const client = this.connection.client;
    if (!client) {
      return;
    }
    try {
      const [rows, crashes] = await Promise.all([gpu ? getGpu(client) : Promise.resolve([]), getCrashes(client)]);
      for (const row of rows) {
        this.rows.set(row.worker, mergeGpuRow(this.rows.get(row.worker), row));
      }
      this.crashes = crashes;
      this.scheduleRedraw();
    } catch (err) {
      swallow("Reading GPU samples and crashes", err);
    }
  }

  /** Workers with samples first, then nodes; undefined when cancelled. */
  private async pick(): Promise<GpuTarget | undefined> {
    type Item = vscode.QuickPickItem & { target?: GpuTarget };
    const live = this.state.workers.filter((w) => w.state !== "exited" && w.agent);
    const withRows = [...this.rows.values()];
    const workerItems: Item[] = withRows.map((r) => {
      const w = this.state.workers.find((x) => x.id === r.worker);
      const last = r.samples.length ? r.samples[r.samples.length - 1] : undefined;
      return {
        label: w ? workerLabel(w) : r.rank !== null ? `rank ${r.rank}` : r.worker.slice(0, 8),
        description: `${formatBytes(last?.used_bytes)} now · peak ${formatBytes(r.peak_bytes)}${r.growing ? " · growing" : ""}`,
        target: { kind: "worker", id: r.worker },
      };
    });
    for (const w of live.filter((w) => !this.rows.has(w.id))) {
      workerItems.push({ label: workerLabel(w), description: "no GPU samples yet", target: { kind: "worker", id: w.id } });
    }
    const nodeItems: Item[] = groupWorkers(this.state.workers, this.state.nodes)
      .filter((n) => n.alive)
      .map((n) => ({ label: nodeLabel(n), description: `${withRows.filter((r) => this.state.workers.some((w) => w.id === r.worker && w.node_id === n.nodeId)).length} workers with GPU samples`, target: { kind: "node", id: n.nodeId } }));
    if (!workerItems.length && !nodeItems.length) {
      void vsapi.showInformationMessage("Ray Sleuth: no workers yet, so no GPU memory to chart.");
      return undefined;
    }
    const items: Item[] = [
      { label: "Workers", kind: vscode.QuickPickItemKind.Separator },
      ...workerItems,
      { label: "Nodes", kind: vscode.QuickPickItemKind.Separator },
      ...nodeItems,
    ];
    const picked = await vscode.window.showQuickPick(items, { title: "Ray Sleuth: GPU memory of…", placeHolder: "A worker or a node" });
    return picked?.target;
  }

  dispose(): void {
    if (this.redraw !== undefined) {
      clearTimeout(this.redraw);
    }
    for (const chart of [...this.charts.values()]) {
      chart.panel.dispose();
    }
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
