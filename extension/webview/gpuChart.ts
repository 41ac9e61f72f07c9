// The GPU memory chart in its webview: uPlot lines of the model's series
// (views/gpuSeries.ts computes them in the extension), the "growing" stretch
// shaded under them, crash and OOM markers drawn over them with uPlot's hooks.
// Runs in the webview: DOM only, nothing of the extension host.
import uPlot from "uplot";
import { ChartSeries, GpuChartModel, RenderedSummary } from "./protocol";
import { BYTE_INCRS, Palette, bytesText, seriesColor, timeText } from "./theme";

function styleOf(s: ChartSeries, i: number, p: Palette, growing: boolean): Partial<uPlot.Series> & { stroke: string } {
  switch (s.kind) {
    case "used":
      return { stroke: growing ? p.orange : p.blue, width: 2.5 };
    case "nodeUsed":
      return { stroke: growing ? p.orange : p.blue, width: 2.5 };
    case "peak":
      return { stroke: p.red, width: 1, dash: [6, 4] };
    case "torch":
      return { stroke: p.green, width: 1.5 };
    case "torchReserved":
      return { stroke: p.green, width: 1, dash: [3, 2] };
    case "torchPeak":
      return { stroke: p.green, width: 1, dash: [6, 4] };
    case "deviceUsed":
      return { stroke: p.purple, width: 1, dash: [2, 3] };
    case "total":
      return { stroke: p.muted, width: 1, dash: [10, 4] };
    case "worker":
      return { stroke: seriesColor(p, i), width: 1.5 };
  }
}

/** `#rrggbb` (or any CSS colour) with an alpha, for fills. */
function withAlpha(color: string, alpha: number): string {
  const m = /^#([0-9a-f]{6})$/i.exec(color);
  if (!m) {
    return color;
  }
  const n = parseInt(m[1], 16);
  return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

/**
 * The stacked parts of a worker's memory as uPlot bands (series indices count the x series as
 * 0): torch's free cache between "torchReserved" and "torch", not PyTorch between "used" and
 * "torchReserved". None unless the model is stacked.
 */
export function stackBands(model: GpuChartModel, p: Palette): uPlot.Band[] {
  const at = (kind: string) => model.series.findIndex((s) => s.kind === kind) + 1;
  const [used, reserved, torch] = [at("used"), at("torchReserved"), at("torch")];
  if (!model.stacked || !used || !reserved || !torch) {
    return [];
  }
  return [
    { series: [reserved, torch], fill: withAlpha(p.green, 0.15) },
    { series: [used, reserved], fill: withAlpha(p.orange, 0.22) },
  ];
}

/** The key of a PNG of the chart (the page's own legend is not on the canvas): each line's label and colour. */
export function gpuLegend(model: GpuChartModel, p: Palette): { text: string; color: string }[] {
  return model.series.map((s, i) => ({ text: s.label, color: styleOf(s, i, p, model.growing !== null).stroke }));
}

/** The model's series, with the x range stretched (no values there) to markers outside it. */
export function gpuData(model: GpuChartModel): uPlot.AlignedData {
  const x = [...model.x];
  const values = model.series.map((s) => [...s.values]);
  const times = model.markers.map((m) => m.t);
  if (times.length && x.length) {
    const lo = Math.min(...times);
    const hi = Math.max(...times);
    if (lo < x[0]) {
      x.unshift(lo - 1);
      values.forEach((v) => v.unshift(null));
    }
    if (hi > x[x.length - 1]) {
      x.push(hi + 1);
      values.forEach((v) => v.push(null));
    }
  }
  return [x, ...values] as uPlot.AlignedData;
}

/** The top of the byte axis: the data with some room, the device's total only once the data comes near it. */
export function byteRange(model: GpuChartModel, dataMax: number): [number, number] {
  const top = (kinds: (k: string) => boolean) => Math.max(0, ...model.series.filter((s) => kinds(s.kind)).flatMap((s) => s.values.filter((v): v is number => v !== null)));
  const used = top((k) => k !== "total");
  const total = top((k) => k === "total");
  if (total > 0 && total <= used * 1.25) {
    return [0, total * 1.05];
  }
  const max = used > 0 ? used : dataMax;
  return [0, max > 0 ? max * 1.25 : 1];
}

/** What the chart draws, counted from the model's drawable parts (the tests read it). */
function summaryOf(u: uPlot, model: GpuChartModel, markers: number): RenderedSummary {
  const drawn = model.series.filter((s) => s.values.some((v) => v !== null));
  return {
    view: "gpu",
    series: drawn.length,
    points: drawn.reduce((n, s) => n + s.values.filter((v) => v !== null).length, 0),
    markers,
    lanes: 0,
    labels: drawn.map((s) => s.label),
    width: u.width,
    height: u.height,
    growing: model.growing !== null,
  };
}

/** `get` returns the model now shown: the hooks read it at every draw (new samples come with setData). */
export function gpuOptions(get: () => GpuChartModel, size: { width: number; height: number }, p: Palette, onDrawn: (s: RenderedSummary) => void): uPlot.Options {
  const px = uPlot.pxRatio;
  const model = get();
  const growing = model.growing !== null;
  const xPos = (u: uPlot, t: number) => u.valToPos(t, "x", true);
  return {
    width: size.width,
    height: size.height,
    bands: stackBands(model, p),
    cursor: { drag: { x: true, y: false } },
    legend: { live: true },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => byteRange(get(), max) } },
    axes: [
      { stroke: p.muted, grid: { stroke: p.grid, width: 1 }, ticks: { stroke: p.grid, width: 1 } },
      { stroke: p.muted, grid: { stroke: p.grid, width: 1 }, ticks: { stroke: p.grid, width: 1 }, size: 76, incrs: BYTE_INCRS, values: (_u, splits) => splits.map((v) => bytesText(v)) },
    ],
    series: [
      { label: "time", value: (_u, v) => (v === null ? "-" : timeText(v)) },
      ...model.series.map((s, i) => ({
        label: s.label,
        spanGaps: true,
        points: { show: false },
        value: (_u: uPlot, v: number | null) => bytesText(v),
        ...styleOf(s, i, p, growing),
        ...(model.stacked && s.kind === "torch" ? { fill: withAlpha(p.green, 0.35) } : {}),
      })),
    ],
    hooks: {
      // Under the lines: the stretch the broker calls growing.
      drawClear: [
        (u) => {
          const model = get();
          if (!model.growing) {
            return;
          }
          const { top, height } = u.bbox;
          const x0 = xPos(u, model.growing.from);
          const x1 = Math.max(xPos(u, model.growing.to), x0 + 4 * px);
          u.ctx.save();
          u.ctx.fillStyle = p.yellow;
          u.ctx.globalAlpha = 0.18;
          u.ctx.fillRect(x0, top, x1 - x0, height);
          u.ctx.globalAlpha = 1;
          u.ctx.fillStyle = p.orange;
          u.ctx.font = `bold ${11 * px}px sans-serif`;
          u.ctx.textAlign = "right";
          u.ctx.fillText(`▲ ${model.growing.label}`, Math.min(u.bbox.left + u.bbox.width - 4 * px, Math.max(x1, u.bbox.left + 300 * px)), top + 14 * px);
          u.ctx.restore();
        },
      ],
      // Over the lines: a crash or OOM marker at its time.
      draw: [
        (u) => {
          const model = get();
          const { left, top, width, height } = u.bbox;
          let shown = 0;
          u.ctx.save();
          for (const m of model.markers) {
            const x = xPos(u, m.t);
            if (x < left - 1 || x > left + width + 1) {
              continue;
            }
            shown++;
            u.ctx.strokeStyle = p.red;
            u.ctx.fillStyle = p.red;
            u.ctx.lineWidth = (m.kind === "oom" ? 3 : 1.5) * px;
            u.ctx.setLineDash(m.kind === "oom" ? [] : [4 * px, 3 * px]);
            u.ctx.beginPath();
            u.ctx.moveTo(x, top);
            u.ctx.lineTo(x, top + height);
            u.ctx.stroke();
            u.ctx.font = `bold ${11 * px}px sans-serif`;
            u.ctx.textAlign = x > left + width / 2 ? "right" : "left";
            u.ctx.fillText(`✖ ${m.label}`, x + (x > left + width / 2 ? -4 : 4) * px, top + (m.kind === "oom" ? 30 : 46) * px);
          }
          // The device's total above the scale: say where it is.
          const total = (model.series.find((s) => s.kind === "total")?.values ?? []).filter((v) => v !== null).pop();
          if (typeof total === "number" && total > (u.scales.y.max ?? Number.POSITIVE_INFINITY)) {
            u.ctx.fillStyle = p.muted;
            u.ctx.font = `${11 * px}px sans-serif`;
            u.ctx.textAlign = "right";
            u.ctx.fillText(`device total ${bytesText(total)} ↑ (above the scale)`, left + width - 4 * px, top + height - 6 * px);
          }
          u.ctx.restore();
          onDrawn(summaryOf(u, model, shown));
        },
      ],
    },
  };
}
