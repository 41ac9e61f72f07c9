// The GPU memory charts' series (issue 14) from samples shaped as GET /v1/gpu
// and the `gpu` stream events send them: a worker's lines, a node's sums, the
// stream's samples merged, crash and OOM markers, the "growing" stretch; and
// the chart page's CSP (local resources only). No broker, no window.
import * as assert from "assert";
import { CrashRecordSummary, GpuRow, GpuSample } from "../../../extension/broker/types";
import { crashMarkers, formatBytes, mergeGpuRow, nodeChart, workerChart, workerPoints } from "../../../extension/views/gpuSeries";
import { chartCsp, chartPageHtml } from "../../../extension/views/chartHtml";

const GIB = 2 ** 30;
const MIB = 2 ** 20;

function sample(t: number, used: number, extra: Partial<GpuSample> = {}): GpuSample {
  return { t, gpu: 0, uuid: "GPU-0", used_bytes: used, device_used_bytes: used + 2 * GIB, total_bytes: 80 * GIB, ...extra };
}

function row(worker: string, rank: number | null, samples: GpuSample[], growing = false): GpuRow {
  return { worker, rank, peak_bytes: Math.max(0, ...samples.map((s) => s.used_bytes ?? 0)), growing, samples };
}

function crash(id: string, worker: string, time: number, kind: CrashRecordSummary["kind"], exc: string | null = null): CrashRecordSummary {
  return { id, time, kind, exc_type: exc, message: null, hint: null, worker: { id: worker, rank: 0 }, held_until: null, can_rerun: false };
}

const series = (m: ReturnType<typeof workerChart>, kind: string) => m.series.find((s) => s.kind === kind)?.values;

describe("GPU memory series", () => {
  it("charts one worker: used, peak, device used and the device's total, per sample time", () => {
    const r = row("w0", 0, [sample(100, 3 * GIB), sample(102, 4 * GIB), sample(104, 3.5 * GIB)]);
    const m = workerChart("GPU memory · rank 0", r, []);
    assert.deepStrictEqual(m.x, [100, 102, 104]);
    assert.deepStrictEqual(series(m, "used"), [3 * GIB, 4 * GIB, 3.5 * GIB]);
    assert.deepStrictEqual(series(m, "peak"), [3 * GIB, 4 * GIB, 4 * GIB]);
    assert.deepStrictEqual(series(m, "total"), [80 * GIB, 80 * GIB, 80 * GIB]);
    assert.deepStrictEqual(series(m, "deviceUsed"), [5 * GIB, 6 * GIB, 5.5 * GIB]);
    assert.strictEqual(series(m, "torch"), undefined, "no torch line where torch never reported");
    assert.strictEqual(m.growing, null);
    assert.strictEqual(m.empty, null);
    assert.match(m.subtitle, /now 3\.5 GiB · peak 4\.0 GiB · device 5\.5 GiB of 80\.0 GiB · 3 samples/);
  });

  it("adds torch's allocated bytes and their peak where the task uses torch", () => {
    const r = row("w0", 0, [sample(1, GIB, { torch_allocated: 512 * MIB, torch_max_allocated: 700 * MIB }), sample(2, GIB, { torch_allocated: 600 * MIB, torch_max_allocated: 700 * MIB })]);
    const m = workerChart("t", r, []);
    assert.deepStrictEqual(series(m, "torch"), [512 * MIB, 600 * MIB]);
    assert.deepStrictEqual(series(m, "torchPeak"), [700 * MIB, 700 * MIB]);
  });

  it("stacks the process's memory in three parts where torch reports what it reserved (issue 26)", () => {
    const r = row("w0", 0, [
      sample(1, 5 * GIB, { torch_allocated: 2 * GIB, torch_reserved: 3 * GIB, torch_max_allocated: 2 * GIB }),
      sample(2, 6 * GIB, { torch_allocated: 2 * GIB, torch_reserved: 3 * GIB, torch_max_allocated: 2 * GIB }),
    ]);
    const m = workerChart("t", r, []);
    assert.strictEqual(m.stacked, true);
    assert.deepStrictEqual(series(m, "torch"), [2 * GIB, 2 * GIB], "the bottom part: torch allocated");
    assert.deepStrictEqual(series(m, "torchReserved"), [3 * GIB, 3 * GIB], "its top: allocated + the free cache");
    assert.deepStrictEqual(series(m, "used"), [5 * GIB, 6 * GIB], "the top of all: above reserved is not PyTorch's");
    assert.match(m.series.find((s) => s.kind === "used")?.label ?? "", /not PyTorch/);
    assert.match(m.series.find((s) => s.kind === "torchReserved")?.label ?? "", /free cache/);
    const plain = workerChart("t", row("w0", 0, [sample(1, GIB, { torch_allocated: GIB })]), []);
    assert.strictEqual(plain.stacked, false, "no stack without torch's reserved bytes");
  });

  it("adds up a worker's GPUs at each time", () => {
    const r = row("w0", 0, [sample(1, GIB, { gpu: 0, uuid: "A" }), sample(1, 2 * GIB, { gpu: 1, uuid: "B" })]);
    const [p] = workerPoints(r);
    assert.deepStrictEqual([p.used, p.total, p.devices.size], [3 * GIB, 160 * GIB, 2]);
  });

  it("highlights the newest five samples of a row the broker calls growing", () => {
    const samples = [0, 1, 2, 3, 4, 5, 6].map((i) => sample(10 + 2 * i, 3 * GIB + i * 256 * MIB));
    const m = workerChart("t", row("w0", 0, samples, true), []);
    assert.deepStrictEqual(m.growing && [m.growing.from, m.growing.to], [14, 22]);
    assert.match(m.growing?.label ?? "", /growing: \+1\.0 GiB over the last 5 samples, never fell/);
    assert.match(m.subtitle, /growing$/);
  });

  it("marks the worker's crashes, an OOM apart, and none of other workers", () => {
    const crashes = [crash("c1", "w0", 50, "exception", "FloatingPointError"), crash("c2", "w0", 60, "oom"), crash("c3", "w9", 55, "exception", "KeyError"), crash("c4", "w0", 70, "exception", "OutOfMemoryError")];
    const markers = crashMarkers(crashes, new Set(["w0"]));
    assert.deepStrictEqual(
      markers.map((m) => [m.t, m.kind, m.label]),
      [
        [50, "crash", "crash: FloatingPointError"],
        [60, "oom", "OOM"],
        [70, "crash", "crash: OutOfMemoryError"],
      ],
    );
    const cuda = { ...crash("c5", "w0", 80, "exception", "RuntimeError"), message: "CUDA out of memory. Tried to allocate 2.00 GiB" };
    assert.strictEqual(crashMarkers([cuda], new Set(["w0"]))[0].kind, "oom");
    assert.strictEqual(workerChart("t", row("w0", 0, [sample(1, GIB)]), crashes).markers.length, 3);
  });

  it("says why there is no chart for a worker without samples, and keeps its crashes", () => {
    const m = workerChart("t", undefined, []);
    assert.match(m.empty ?? "", /No GPU samples from it yet/);
    assert.doesNotMatch(m.empty ?? "", /`/, "no markdown backticks: the page shows them as they are");
    assert.deepStrictEqual(m.x, []);
    // A machine (or worker) without a GPU: said as it is, no "yet" (issue 25, item 8).
    assert.match(workerChart("t", undefined, [], []).empty ?? "", /^No GPU memory to show: Ray gave this worker no GPU/);
    assert.match(workerChart("t", undefined, [], [0]).empty ?? "", /No GPU samples from it yet/);
  });

  it("merges the stream's newest samples into what GET sent, once each, in time order", () => {
    const first = row("w0", 0, [sample(1, GIB), sample(3, GIB)]);
    const event = { ...row("w0", 0, [sample(3, GIB), sample(5, 2 * GIB)], true), peak_bytes: 2 * GIB };
    const merged = mergeGpuRow(first, event);
    assert.deepStrictEqual(merged.samples.map((s) => s.t), [1, 3, 5]);
    assert.strictEqual(merged.growing, true);
    assert.strictEqual(merged.peak_bytes, 2 * GIB);
    assert.deepStrictEqual(mergeGpuRow(undefined, event).samples.map((s) => s.t), [3, 5]);
  });

  it("charts a node: a line per worker, their sum held between samples, each GPU counted once", () => {
    const a = row("wa", 0, [sample(10, GIB), sample(12, 2 * GIB)]);
    const b = row("wb", 1, [sample(11, 3 * GIB), sample(13, 3 * GIB)]);
    const m = nodeChart("GPU memory · node", [a, b], [crash("c", "wb", 12.5, "exception", "ValueError")], (_id, rank) => `rank ${rank}`);
    assert.deepStrictEqual(m.x, [10, 11, 12, 13]);
    assert.deepStrictEqual(
      m.series.filter((s) => s.kind === "worker").map((s) => [s.label, s.values]),
      [
        ["rank 0 used", [GIB, null, 2 * GIB, null]],
        ["rank 1 used", [null, 3 * GIB, null, 3 * GIB]],
      ],
    );
    // Between its samples (and a while after its last one) a worker counts with its last value.
    assert.deepStrictEqual(series(m, "nodeUsed"), [GIB, 4 * GIB, 5 * GIB, 5 * GIB]);
    assert.deepStrictEqual(series(m, "peak"), [GIB, 4 * GIB, 5 * GIB, 5 * GIB]);
    // A worker silent for longer than it could be late no longer counts.
    const gone = nodeChart("n", [row("wa", 0, [sample(10, GIB), sample(12, GIB)]), row("wb", 1, [sample(11, GIB), sample(40, GIB)])], [], (_i, r) => `rank ${r}`);
    assert.deepStrictEqual(series(gone, "nodeUsed"), [GIB, 2 * GIB, 2 * GIB, GIB]);
    // Both workers share GPU-0: its total once, not twice.
    assert.deepStrictEqual(series(m, "total"), [80 * GIB, 80 * GIB, 80 * GIB, 80 * GIB]);
    assert.deepStrictEqual(m.markers.map((k) => k.label), ["rank 0 crash: ValueError"]);
    assert.match(m.subtitle, /^2 workers · now 5\.0 GiB · peak 5\.0 GiB · 1 GPU$/);
  });

  it("writes bytes as the Cluster view does", () => {
    assert.strictEqual(formatBytes(3 * GIB), "3.0 GiB");
    assert.strictEqual(formatBytes(512 * MIB), "512 MiB");
    assert.strictEqual(formatBytes(null), "-");
  });

  it("lets the chart page load only the extension's own files, by nonce", () => {
    const csp = chartCsp("https://file+.vscode-resource.vscode-cdn.net", "abc123");
    assert.match(csp, /^default-src 'none'/);
    assert.match(csp, /script-src 'nonce-abc123'(;|$)/);
    assert.ok(!/https?:\/\/(?!file\+\.vscode-resource)/.test(csp), `no other origin: ${csp}`);
    assert.ok(!csp.includes("unsafe-inline") && !csp.includes("unsafe-eval") && !csp.includes("*"), csp);
    const html = chartPageHtml({ title: "GPU <memory>", cspSource: "vscode-resource:", scriptUri: "vscode-resource:/ext/dist/webview/charts.js", styleUri: "vscode-resource:/ext/dist/webview/charts.css", nonce: "abc123" });
    assert.match(html, /<script nonce="abc123" src="vscode-resource:\/ext\/dist\/webview\/charts\.js"><\/script>/);
    assert.strictEqual((html.match(/<script/g) ?? []).length, 1);
    assert.match(html, /GPU &lt;memory&gt;/);
  });
});
