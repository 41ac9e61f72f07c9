// Pure shaping of the GPU memory charts (issue 14): a worker's or a node's
// samples from `GET /v1/gpu` and the `gpu` stream events, merged, turned into
// aligned series (used, torch allocated, peak, device used, device total),
// crash and OOM markers, and the stretch the broker calls "growing". No vscode import.
import { CrashRecordSummary, GpuRow } from "../broker/types";
import { formatBytes as clusterBytes } from "../cluster/workerGrouping";
import { ChartMarker, ChartSeries, GpuChartModel } from "../webview/protocol";

/** Samples kept per worker (the broker keeps 720 per worker and GPU). */
export const KEEP_SAMPLES = 720 * 8;

/** Newest samples the broker's "growing" looks at (broker/telemetry/gpu.py WINDOW). */
export const GROWING_WINDOW = 5;

/** "3.5 GiB" as the Cluster view writes it; "-" for no number. */
export function formatBytes(n: number | null | undefined): string {
  return n === null || n === undefined || !Number.isFinite(n) ? "-" : clusterBytes(n);
}

/** A row with the samples of `incoming` (a stream event's newest ones) added; no sample twice. */
export function mergeGpuRow(known: GpuRow | undefined, incoming: GpuRow): GpuRow {
  if (!known) {
    return { ...incoming, samples: [...incoming.samples].sort((a, b) => a.t - b.t).slice(-KEEP_SAMPLES) };
  }
  const key = (s: { t: number; gpu: number | null; uuid?: string | null }) => `${s.t}\u0000${s.gpu}\u0000${s.uuid ?? ""}`;
  const seen = new Set(known.samples.map(key));
  const samples = [...known.samples, ...incoming.samples.filter((s) => !seen.has(key(s)))].sort((a, b) => a.t - b.t).slice(-KEEP_SAMPLES);
  return { ...incoming, peak_bytes: Math.max(known.peak_bytes ?? 0, incoming.peak_bytes ?? 0), samples };
}

/** One worker at one sample time, its GPUs added up. */
export interface WorkerPoint {
  t: number;
  used: number;
  deviceUsed: number | null;
  total: number | null;
  torch: number | null;
  torchPeak: number | null;
  /** What torch's caching allocator holds (allocated + its free cache). */
  torchReserved: number | null;
  /** Per GPU (uuid, else index): device used and total, for a node's sums. */
  devices: Map<string, { used: number | null; total: number | null }>;
}

function add(a: number | null, b: number | null | undefined): number | null {
  return b === null || b === undefined ? a : (a ?? 0) + b;
}

/** A worker's samples per time, its GPUs added up, oldest first. */
export function workerPoints(row: GpuRow): WorkerPoint[] {
  const byT = new Map<number, WorkerPoint>();
  for (const s of row.samples) {
    let p = byT.get(s.t);
    if (!p) {
      p = { t: s.t, used: 0, deviceUsed: null, total: null, torch: s.torch_allocated ?? null, torchPeak: s.torch_max_allocated ?? null, torchReserved: s.torch_reserved ?? null, devices: new Map() };
      byT.set(s.t, p);
    }
    p.used += s.used_bytes ?? 0;
    p.deviceUsed = add(p.deviceUsed, s.device_used_bytes);
    p.total = add(p.total, s.total_bytes);
    p.devices.set(s.uuid ?? `gpu${s.gpu}`, { used: s.device_used_bytes ?? null, total: s.total_bytes ?? null });
  }
  return [...byT.values()].sort((a, b) => a.t - b.t);
}

function runningMax(values: (number | null)[]): (number | null)[] {
  let top: number | null = null;
  return values.map((v) => {
    if (v !== null) {
      top = top === null ? v : Math.max(top, v);
    }
    return top;
  });
}

/** Crash records of these workers as markers: OOMs apart from other crashes. */
export function crashMarkers(crashes: readonly CrashRecordSummary[], workerIds: ReadonlySet<string>, labelOf?: (c: CrashRecordSummary) => string): ChartMarker[] {
  return crashes
    .filter((c) => c.worker?.id !== undefined && workerIds.has(c.worker.id))
    .map((c) => {
      const oom = c.kind === "oom" || /out of memory/i.test(`${c.exc_type ?? ""} ${c.message ?? ""}`);
      const what = oom ? "OOM" : `crash: ${c.exc_type ?? c.kind.replace("_", " ")}`;
      return { t: c.time, kind: oom ? ("oom" as const) : ("crash" as const), label: labelOf ? `${labelOf(c)} ${what}` : what };
    })
    .sort((a, b) => a.t - b.t);
}

/** The newest GROWING_WINDOW points of a row the broker calls growing: where, and by how much. */
export function growingStretch(row: GpuRow, points = workerPoints(row)): { from: number; to: number; rise: number } | null {
  if (!row.growing || points.length < 2) {
    return null;
  }
  const window = points.slice(-GROWING_WINDOW);
  return { from: window[0].t, to: window[window.length - 1].t, rise: window[window.length - 1].used - window[0].used };
}

function emptyModel(title: string, empty: string, markers: ChartMarker[] = []): GpuChartModel {
  return { view: "gpu", title, subtitle: "", x: [], series: [], markers, growing: null, empty };
}

const NO_SAMPLES =
  "No GPU samples from it yet. Workers with a GPU send NVML samples with their heartbeats where pynvml (nvidia-ml-py) imports; Run Doctor checks NVML on each node.";
const NO_GPU = "No GPU memory to show: Ray gave this worker no GPU (its GPU ids are empty), so there is nothing to sample.";

/**
 * One worker's chart: used, torch allocated (and its peak), peak, device used, device total.
 * `gpuIds`: the worker's GPU ids, when known (an empty list: it has no GPU, and the chart says so).
 */
export function workerChart(title: string, row: GpuRow | undefined, crashes: readonly CrashRecordSummary[], gpuIds?: readonly number[]): GpuChartModel {
  const markers = row ? crashMarkers(crashes, new Set([row.worker])) : [];
  const points = row ? workerPoints(row) : [];
  if (!row || !points.length) {
    return emptyModel(title, gpuIds !== undefined && gpuIds.length === 0 ? NO_GPU : NO_SAMPLES, markers);
  }
  const used = points.map((p) => p.used);
  const series: ChartSeries[] = [
    { label: "used (this process, NVML)", kind: "used", values: used },
    { label: "peak", kind: "peak", values: runningMax(used) },
  ];
  const stacked = points.some((p) => p.torch !== null && p.torchReserved !== null);
  if (stacked) {
    // Three parts of `used`, stacked: torch allocated, + torch's free cache, + not PyTorch.
    series[0].label = "used (NVML); above torch reserved: not PyTorch (CUDA context, NCCL, other libraries)";
    series.push({ label: "torch allocated (filled)", kind: "torch", values: points.map((p) => p.torch) });
    series.push({ label: "torch reserved; above torch allocated: its free cache", kind: "torchReserved", values: points.map((p) => p.torchReserved) });
    series.push({ label: "torch peak allocated", kind: "torchPeak", values: points.map((p) => p.torchPeak) });
  } else if (points.some((p) => p.torch !== null)) {
    series.push({ label: "torch allocated", kind: "torch", values: points.map((p) => p.torch) });
    series.push({ label: "torch peak allocated", kind: "torchPeak", values: points.map((p) => p.torchPeak) });
  }
  series.push({ label: "device used (all processes)", kind: "deviceUsed", values: points.map((p) => p.deviceUsed) });
  series.push({ label: "device total", kind: "total", values: points.map((p) => p.total) });
  const last = points[points.length - 1];
  const g = growingStretch(row, points);
  return {
    view: "gpu",
    title,
    subtitle:
      `now ${formatBytes(last.used)} · peak ${formatBytes(Math.max(row.peak_bytes ?? 0, ...used))} · device ${formatBytes(last.deviceUsed)} of ${formatBytes(last.total)}` +
      ` · ${points.length} samples` +
      (row.growing ? " · growing" : ""),
    x: points.map((p) => p.t),
    series,
    markers,
    growing: g ? { from: g.from, to: g.to, label: `growing: +${formatBytes(g.rise)} over the last ${GROWING_WINDOW} samples, never fell` } : null,
    empty: null,
    stacked,
  };
}

/** Seconds a worker's last sample still counts after it, at least (it may just not have sent the next). */
export const HOLD_MIN_S = 10;

/**
 * Each worker's value at every x: its sample there, else its last one before, for as long as a
 * sample of it could still be on its way (three of its intervals, HOLD_MIN_S at least).
 */
function held(x: readonly number[], points: readonly WorkerPoint[], pick: (p: WorkerPoint) => number | null): (number | null)[] {
  const gaps = points.slice(1).map((p, k) => p.t - points[k].t).sort((a, b) => a - b);
  const hold = Math.max(HOLD_MIN_S, 3 * (gaps[Math.floor(gaps.length / 2)] ?? 0));
  let i = -1;
  return x.map((t) => {
    while (i + 1 < points.length && points[i + 1].t <= t) {
      i++;
    }
    return i < 0 || t > points[i].t + hold ? null : pick(points[i]);
  });
}

/**
 * A node's chart: one "used" line per worker (`labelOf` names it), their sum, its peak, and the
 * node's GPUs (device used and total, each GPU counted once however many workers share it).
 */
export function nodeChart(title: string, rows: readonly GpuRow[], crashes: readonly CrashRecordSummary[], labelOf: (workerId: string, rank: number | null) => string): GpuChartModel {
  const markers = crashMarkers(crashes, new Set(rows.map((r) => r.worker)), (c) => labelOf(c.worker.id ?? "", c.worker.rank ?? null));
  const perWorker = rows.map((r) => ({ row: r, points: workerPoints(r) })).filter((w) => w.points.length);
  if (!perWorker.length) {
    return emptyModel(title, `No GPU samples from the workers of this node. ${NO_SAMPLES.slice(NO_SAMPLES.indexOf("Workers with"))}`, markers);
  }
  const x = [...new Set(perWorker.flatMap((w) => w.points.map((p) => p.t)))].sort((a, b) => a - b);
  const series: ChartSeries[] = perWorker.map((w) => {
    const at = new Map(w.points.map((p) => [p.t, p.used]));
    return { label: `${labelOf(w.row.worker, w.row.rank)} used`, kind: "worker", values: x.map((t) => at.get(t) ?? null) };
  });
  const heldUsed = perWorker.map((w) => held(x, w.points, (p) => p.used));
  const sum = x.map((_, i) => heldUsed.reduce<number | null>((acc, v) => add(acc, v[i]), null));
  series.push({ label: "node used (all workers)", kind: "nodeUsed", values: sum });
  series.push({ label: "peak", kind: "peak", values: runningMax(sum) });
  // Each GPU once: the newest reading of any worker that uses it.
  const devices = new Map<string, { t: number; used: number | null; total: number | null }[]>();
  for (const w of perWorker) {
    for (const p of w.points) {
      for (const [id, d] of p.devices) {
        devices.set(id, [...(devices.get(id) ?? []), { t: p.t, ...d }]);
      }
    }
  }
  const deviceSeries = (pick: (d: { used: number | null; total: number | null }) => number | null) => {
    const perDevice = [...devices.values()].map((readings) => {
      readings.sort((a, b) => a.t - b.t);
      let i = -1;
      return x.map((t) => {
        while (i + 1 < readings.length && readings[i + 1].t <= t) {
          i++;
        }
        return i < 0 ? null : pick(readings[i]);
      });
    });
    return x.map((_, j) => perDevice.reduce<number | null>((acc, v) => add(acc, v[j]), null));
  };
  series.push({ label: "devices used (all processes)", kind: "deviceUsed", values: deviceSeries((d) => d.used) });
  series.push({ label: "devices total", kind: "total", values: deviceSeries((d) => d.total) });
  const growingRows = perWorker.filter((w) => w.row.growing);
  const g = growingRows.length ? growingStretch(growingRows[0].row, growingRows[0].points) : null;
  const lastSum = sum[sum.length - 1];
  return {
    view: "gpu",
    title,
    subtitle: `${perWorker.length} worker${perWorker.length === 1 ? "" : "s"} · now ${formatBytes(lastSum)} · peak ${formatBytes(Math.max(...sum.map((v) => v ?? 0)))} · ${devices.size} GPU${devices.size === 1 ? "" : "s"}`,
    x,
    series,
    markers,
    growing: g
      ? { from: g.from, to: g.to, label: `growing: ${growingRows.map((w) => labelOf(w.row.worker, w.row.rank)).join(", ")} (+${formatBytes(g.rise)} over the last ${GROWING_WINDOW} samples, never fell)` }
      : null,
    empty: null,
  };
}
