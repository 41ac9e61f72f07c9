// What the chart webviews (GPU memory, timeline) and the extension say to each
// other: the models the extension computes (views/gpuSeries.ts,
// views/timelineModel.ts) and what the webview reports once it has drawn them.
// Types only: compiled both for the extension host and for the webview.

/** One line of the GPU chart. `kind` picks its colour and style in the webview. */
export interface ChartSeries {
  label: string;
  kind: "used" | "torch" | "torchReserved" | "torchPeak" | "peak" | "deviceUsed" | "total" | "worker" | "nodeUsed";
  /** One value per x (bytes); null where this series has no sample. */
  values: (number | null)[];
}

/** A crash of the charted worker (or of a worker of the charted node): a vertical line. */
export interface ChartMarker {
  /** Seconds since the epoch. */
  t: number;
  kind: "crash" | "oom";
  label: string;
}

export interface GpuChartModel {
  view: "gpu";
  title: string;
  /** One line under the title: peak, newest use, the device's total. */
  subtitle: string;
  /** Sample times, seconds since the epoch, ascending. */
  x: number[];
  series: ChartSeries[];
  markers: ChartMarker[];
  /** The memory only went up over the newest samples: that stretch is highlighted. */
  growing: { from: number; to: number; label: string } | null;
  /** What to say instead of a chart (no samples). */
  empty: string | null;
  /**
   * The process's memory stacked in three parts (issue 26): torch allocated (filled to zero), torch's
   * cache (between "torch" and "torchReserved") and not PyTorch (between "torchReserved" and "used").
   */
  stacked?: boolean;
}

export type TimelineKind = "step" | "crash" | "stop" | "inspect" | "hang" | "other";

/** One row of the timeline: a rank (or a worker without one, or the cluster). */
export interface TimelineLane {
  label: string;
  rank: number | null;
}

/** One event on one lane. */
export interface TimelineMark {
  lane: number;
  /** Seconds since the epoch. */
  t: number;
  kind: TimelineKind;
  label: string;
}

/** A pause of one rank, from its `stopped` entry to its `resumed` one (t1 null: still stopped). */
export interface TimelineSpan {
  lane: number;
  t0: number;
  t1: number | null;
  label: string;
}

export interface TimelineModel {
  view: "timeline";
  title: string;
  subtitle: string;
  lanes: TimelineLane[];
  marks: TimelineMark[];
  spans: TimelineSpan[];
  /** The time range shown (seconds since the epoch). */
  t0: number;
  t1: number;
  empty: string | null;
}

export type ChartModel = GpuChartModel | TimelineModel;

/** Extension → webview. */
export type HostMessage = { type: "model"; model: ChartModel } | { type: "image"; id: number };

/** What the webview drew, counted from what it drew (the tests read it). */
export interface RenderedSummary {
  view: ChartModel["view"];
  /** Drawn series (lines or point sets). */
  series: number;
  /** Data points drawn across the series. */
  points: number;
  markers: number;
  lanes: number;
  /** Lane or series labels, as drawn. */
  labels: string[];
  /** The canvas size in CSS pixels. */
  width: number;
  height: number;
  /** A "growing" highlight is drawn. */
  growing: boolean;
}

/** Webview → extension. */
export type WebviewMessage =
  | { type: "ready" }
  | { type: "rendered"; summary: RenderedSummary }
  | { type: "image"; id: number; dataUrl: string }
  | { type: "error"; message: string };
