// The timeline in its webview: uPlot's time axis (drag to zoom, double-click
// to reset) over one lane per rank; steps, crashes, inspect points, hangs and
// pauses drawn on the lanes with uPlot's draw hook; a hover names the event.
// Runs in the webview: DOM only, nothing of the extension host.
import uPlot from "uplot";
import { RenderedSummary, TimelineKind, TimelineMark, TimelineModel } from "./protocol";
import { Palette, timeText } from "./theme";

/** Lane i sits at y = lanes - 1 - i: the first lane (rank 0) on top. */
function laneY(model: TimelineModel, lane: number): number {
  return model.lanes.length - 1 - lane;
}

function colorOf(kind: TimelineKind, p: Palette): string {
  return { step: p.blue, crash: p.red, stop: p.purple, inspect: p.green, hang: p.orange, other: p.muted }[kind];
}

/** The key of the timeline (the page shows it above the chart, a PNG in its head): each kind's glyph and colour. */
export function timelineLegend(p: Palette): { text: string; color: string }[] {
  return [
    { text: "| step", color: colorOf("step", p) },
    { text: "● inspect", color: colorOf("inspect", p) },
    { text: "✖ crash", color: colorOf("crash", p) },
    { text: "▬ stopped", color: colorOf("stop", p) },
    { text: "◆ suspected hang", color: colorOf("hang", p) },
    { text: "● other event", color: colorOf("other", p) },
  ];
}

/** One mark's shape at (x, y), canvas pixels. */
function drawMark(ctx: CanvasRenderingContext2D, m: TimelineMark, x: number, y: number, px: number, p: Palette): void {
  ctx.fillStyle = ctx.strokeStyle = colorOf(m.kind, p);
  ctx.beginPath();
  switch (m.kind) {
    case "step":
      ctx.lineWidth = 1.5 * px;
      ctx.moveTo(x, y - 7 * px);
      ctx.lineTo(x, y + 7 * px);
      ctx.stroke();
      return;
    case "crash":
      ctx.lineWidth = 3 * px;
      ctx.moveTo(x - 7 * px, y - 7 * px);
      ctx.lineTo(x + 7 * px, y + 7 * px);
      ctx.moveTo(x + 7 * px, y - 7 * px);
      ctx.lineTo(x - 7 * px, y + 7 * px);
      ctx.stroke();
      return;
    case "hang":
      ctx.moveTo(x, y - 8 * px);
      ctx.lineTo(x + 8 * px, y);
      ctx.lineTo(x, y + 8 * px);
      ctx.lineTo(x - 8 * px, y);
      ctx.closePath();
      ctx.fill();
      return;
    default:
      ctx.arc(x, y - (m.kind === "inspect" ? 9 * px : 0), (m.kind === "inspect" ? 3.5 : 3) * px, 0, 2 * Math.PI);
      ctx.fill();
  }
}

export function timelineData(model: TimelineModel): uPlot.AlignedData {
  // One invisible series that spans the time range: the marks are drawn by the hook.
  return [
    [model.t0, model.t1],
    [null, null],
  ] as unknown as uPlot.AlignedData;
}

/** `get` returns the model now shown: the hooks read it at every draw (new events come with setData). */
export function timelineOptions(get: () => TimelineModel, size: { width: number; height: number }, p: Palette, tooltip: HTMLElement, onDrawn: (s: RenderedSummary) => void): uPlot.Options {
  const px = uPlot.pxRatio;
  const n = get().lanes.length;
  return {
    width: size.width,
    height: size.height,
    cursor: { drag: { x: true, y: false }, y: false, points: { show: false } },
    legend: { show: false },
    scales: { x: { time: true }, lane: { auto: false, range: [-0.6, Math.max(0, n - 1) + 0.6] } },
    axes: [
      { stroke: p.muted, grid: { stroke: p.grid, width: 1 }, ticks: { stroke: p.grid, width: 1 } },
      {
        scale: "lane",
        stroke: p.foreground,
        size: 90,
        grid: { stroke: p.grid, width: 1 },
        ticks: { show: false },
        splits: () => get().lanes.map((_, i) => n - 1 - i),
        values: (_u, splits) => splits.map((y) => get().lanes[n - 1 - y]?.label ?? ""),
      },
    ],
    series: [{}, { scale: "lane", show: true, points: { show: false } }],
    hooks: {
      draw: [
        (u) => {
          const model = get();
          const { left, top, width, height } = u.bbox;
          const ctx = u.ctx;
          const xPos = (t: number) => u.valToPos(t, "x", true);
          const yPos = (lane: number) => u.valToPos(laneY(model, lane), "lane", true);
          const lanePx = height / Math.max(1, n + 0.2);
          ctx.save();
          ctx.beginPath();
          ctx.rect(left, top, width, height);
          ctx.clip();
          let drawn = 0;
          for (const s of model.spans) {
            const x0 = xPos(s.t0);
            const x1 = xPos(s.t1 ?? model.t1);
            ctx.fillStyle = p.purple;
            ctx.globalAlpha = 0.35;
            ctx.fillRect(x0, yPos(s.lane) - lanePx * 0.3, Math.max(3 * px, x1 - x0), lanePx * 0.6);
            ctx.globalAlpha = 1;
            drawn++;
          }
          for (const m of model.marks) {
            const x = xPos(m.t);
            if (x >= left - 10 && x <= left + width + 10) {
              drawMark(ctx, m, x, yPos(m.lane), px, p);
              drawn++;
            }
          }
          ctx.restore();
          onDrawn({
            view: "timeline",
            series: new Set(model.marks.map((m) => m.kind)).size + (model.spans.length ? 1 : 0),
            points: drawn,
            markers: model.marks.filter((m) => m.kind === "crash").length,
            lanes: n,
            labels: model.lanes.map((l) => l.label),
            width: u.width,
            height: u.height,
            growing: false,
          });
        },
      ],
      // The event nearest the pointer (within 10 px), named in the tooltip.
      setCursor: [
        (u) => {
          const model = get();
          const { left, top } = u.cursor;
          if (left === undefined || top === undefined || left < 0) {
            tooltip.hidden = true;
            return;
          }
          let best: { d: number; text: string } | undefined;
          const consider = (x: number, lane: number, text: string) => {
            const d = Math.hypot(x - left, u.valToPos(laneY(model, lane), "lane") - top);
            if (d < 10 && (!best || d < best.d)) {
              best = { d, text };
            }
          };
          for (const m of model.marks) {
            consider(u.valToPos(m.t, "x"), m.lane, `${model.lanes[m.lane]?.label}: ${m.label}\n${timeText(m.t)}`);
          }
          for (const s of model.spans) {
            const x0 = u.valToPos(s.t0, "x");
            const x1 = u.valToPos(s.t1 ?? model.t1, "x");
            consider(Math.min(Math.max(left, x0), x1), s.lane, `${model.lanes[s.lane]?.label}: ${s.label}\n${timeText(s.t0)}`);
          }
          tooltip.hidden = !best;
          if (best) {
            tooltip.textContent = best.text;
            tooltip.style.left = `${left + 12}px`;
            tooltip.style.top = `${top + 12}px`;
          }
        },
      ],
    },
  };
}
