// Entry of the chart webviews (GPU memory, timeline), bundled with uPlot into
// dist/webview/charts.js by esbuild: takes the model the extension posts,
// draws it, and reports what it drew ("rendered") and, when asked, the chart
// as a PNG ("image"). Runs in the webview: DOM only, no network.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { gpuData, gpuLegend, gpuOptions } from "./gpuChart";
import { ChartModel, HostMessage, RenderedSummary, WebviewMessage } from "./protocol";
import { palette } from "./theme";
import { timelineData, timelineLegend, timelineOptions } from "./timelineChart";

declare function acquireVsCodeApi(): { postMessage(message: WebviewMessage): void };

const host = acquireVsCodeApi();
const post = (m: WebviewMessage) => host.postMessage(m);

let chart: uPlot | undefined;
let model: ChartModel | undefined;
let lastSummary = "";

function element<T extends HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) {
    throw new Error(`the page has no #${id}`);
  }
  return el as T;
}

function chartSize(): { width: number; height: number } {
  const box = element("chart");
  const legend = model?.view === "gpu" ? 70 : 0;
  const lanes = model?.view === "timeline" ? model.lanes.length : 0;
  const height = model?.view === "timeline" ? Math.max(180, 60 + lanes * 44) : Math.max(240, window.innerHeight - box.offsetTop - legend - 24);
  return { width: Math.max(320, box.clientWidth), height };
}

/** Posts the summary once per change (uPlot draws again on every cursor-free redraw). */
function drawn(summary: RenderedSummary): void {
  const text = JSON.stringify(summary);
  if (text !== lastSummary) {
    lastSummary = text;
    post({ type: "rendered", summary });
  }
}

/** What makes a chart need building anew (else new data goes in with setData, keeping a zoom). */
function shapeOf(m: ChartModel): string {
  return m.view === "gpu" ? `gpu|${m.series.map((s) => `${s.kind}:${s.label}`).join(",")}|${m.growing !== null}` : `timeline|${m.lanes.map((l) => l.label).join(",")}`;
}

let shape = "";
/** The user zoomed in (drag): updates keep that range until a double-click resets it. */
let zoomed = false;

/** The timeline's key above its chart (uPlot's legend is off there: its marks are not series). */
function showKey(next: ChartModel): void {
  let key = document.getElementById("key");
  if (!key) {
    key = document.createElement("div");
    key.id = "key";
    key.className = "meta";
    element("chart").before(key);
  }
  key.replaceChildren(
    ...(next.view === "timeline" ? timelineLegend(palette()) : []).map((item) => {
      const span = document.createElement("span");
      span.textContent = `${item.text}   `;
      span.style.color = item.color;
      return span;
    }),
  );
}

function render(next: ChartModel): void {
  model = next;
  showKey(next);
  element("title").textContent = next.title;
  element("subtitle").textContent = next.subtitle;
  const empty = element("empty");
  empty.textContent = next.empty ?? "";
  empty.hidden = !next.empty;
  const data = next.view === "gpu" ? gpuData(next) : timelineData(next);
  if (chart && shapeOf(next) === shape) {
    chart.setData(data, !zoomed);
    return;
  }
  chart?.destroy();
  chart = undefined;
  shape = shapeOf(next);
  zoomed = false;
  const box = element("chart");
  box.replaceChildren();
  if (next.empty && (next.view === "gpu" ? next.x.length === 0 : next.lanes.length === 0)) {
    drawn({ view: next.view, series: 0, points: 0, markers: 0, lanes: 0, labels: [], width: 0, height: 0, growing: false });
    return;
  }
  const p = palette();
  let built: uPlot;
  if (next.view === "gpu") {
    built = new uPlot(gpuOptions(() => model as typeof next, chartSize(), p, drawn), data, box);
  } else {
    const tooltip = document.createElement("div");
    tooltip.className = "tooltip";
    tooltip.hidden = true;
    built = new uPlot(timelineOptions(() => model as typeof next, chartSize(), p, tooltip, drawn), data, box);
    built.over.appendChild(tooltip);
  }
  built.over.addEventListener("mouseup", () => (zoomed = zoomed || built.select.width > 0));
  built.over.addEventListener("dblclick", () => (zoomed = false));
  chart = built;
}

/** Width of the chart in an image: wider than a side column, so a PNG reads well. */
const IMAGE_WIDTH = 1100;

/** The chart's canvas on the theme's background, with the title above: what a screenshot shows. */
async function image(): Promise<string> {
  const c = chart;
  if (!c) {
    return "";
  }
  const shown = { width: c.width, height: c.height };
  const wide = { width: Math.max(shown.width, IMAGE_WIDTH), height: model?.view === "gpu" ? Math.max(shown.height, 460) : shown.height };
  const resized = wide.width !== shown.width || wide.height !== shown.height;
  if (resized) {
    c.setSize(wide);
    await new Promise((r) => setTimeout(r, 50)); // uPlot redraws in a microtask
  }
  try {
    const p = palette();
    const src = c.ctx.canvas;
    const head = 50 * uPlot.pxRatio;
    const out = document.createElement("canvas");
    out.width = src.width;
    out.height = src.height + head;
    const ctx = out.getContext("2d");
    if (!ctx) {
      return "";
    }
    ctx.fillStyle = p.background;
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.fillStyle = p.foreground;
    ctx.font = `bold ${13 * uPlot.pxRatio}px sans-serif`;
    ctx.fillText(`${model?.title ?? ""} — ${model?.subtitle ?? ""}`, 8, 19 * uPlot.pxRatio);
    // The key, on one line under the title.
    ctx.font = `${12 * uPlot.pxRatio}px sans-serif`;
    let x = 8;
    for (const item of model?.view === "gpu" ? gpuLegend(model, p) : model ? timelineLegend(p) : []) {
      const text = model?.view === "gpu" ? `━ ${item.text}` : item.text;
      ctx.fillStyle = item.color;
      ctx.fillText(text, x, 40 * uPlot.pxRatio);
      x += ctx.measureText(text).width + 16 * uPlot.pxRatio;
    }
    ctx.drawImage(src, 0, head);
    return out.toDataURL("image/png");
  } finally {
    if (resized) {
      c.setSize(shown);
    }
  }
}

window.addEventListener("message", (event: MessageEvent<HostMessage>) => {
  const msg = event.data;
  try {
    if (msg?.type === "model") {
      render(msg.model);
    } else if (msg?.type === "image") {
      image().then(
        (dataUrl) => post({ type: "image", id: msg.id, dataUrl }),
        (err: unknown) => post({ type: "error", message: `image: ${String(err)}` }),
      );
    }
  } catch (err) {
    post({ type: "error", message: err instanceof Error ? `${err.message}\n${err.stack ?? ""}` : String(err) });
  }
});

let resizeTimer: ReturnType<typeof setTimeout> | undefined;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => chart?.setSize(chartSize()), 100);
});

post({ type: "ready" });
