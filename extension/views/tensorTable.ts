// Pure shaping of the cross-rank tensor tables (issue 14): rank × statistic
// (shape, dtype, device, mean, std, min, max, norm, nan/inf, hash) of what
// `raysleuth.inspect()` recorded (GET /v1/inspect) and of a snapshot point's
// expressions ("Compare Across Ranks"), one group per entry and step, with the
// ranks the broker flagged and the cells its reason names. No vscode import.
import { InspectRow, SnapshotRow, TensorSummary } from "../broker/types";

/** The statistic columns, in the order the tables show them. */
export const STAT_COLUMNS = ["shape", "dtype", "device", "mean", "std", "min", "max", "norm", "nan", "inf", "hash"] as const;
export type StatColumn = (typeof STAT_COLUMNS)[number];

/** Hash characters shown (the full hash is in the tooltip): enough to tell ranks apart. */
export const HASH_CHARS = 12;

export interface TensorTableRow {
  rank: number | null;
  worker: string;
  /** One text per STAT_COLUMNS entry ("-" where the summary has none). */
  cells: string[];
  /** Per column: the broker's reason names it (what makes this rank differ). */
  marked: boolean[];
  /** A short repr (values that are no tensor) or the error, else "". */
  note: string;
  isError: boolean;
  differs: boolean;
  /** The broker's reason, "" when the rank agrees. */
  why: string;
  /** The summary on one line, as hovers and logpoints print it. */
  summary: string;
}

/** One entry (a name or expression) at one step (inspect) or capture (snapshot): one row per rank. */
export interface TensorGroup {
  name: string;
  step: number | string | null;
  rows: TensorTableRow[];
  /** Ranks the broker flagged (null: a worker without a rank). */
  flagged: (number | null)[];
  /** Some row has a repr or an error: the table shows a "value" column. */
  hasNotes: boolean;
}

/** "3.2e+1" → "3.2e+01", as Python prints it (the CLI's and the logpoints' numbers). */
function pyExponent(text: string): string {
  return text.replace(/e([+-])(\d)$/, "e$10$2");
}

/** A number as the tables print it: 6 significant digits, exponent notation for the very small and large. */
export function formatNumber(x: number | null | undefined): string {
  if (x === null || x === undefined) {
    return "-";
  }
  if (typeof x !== "number") {
    return String(x);
  }
  if (Number.isInteger(x) && Math.abs(x) < 1e15) {
    return String(x);
  }
  if (!Number.isFinite(x)) {
    return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  }
  const e = Math.floor(Math.log10(Math.abs(x)));
  const strip = (t: string) => pyExponent(t.replace(/\.?0+(e|$)/, "$1"));
  return e < -4 || e >= 6 ? strip(x.toExponential(5)) : strip(x.toPrecision(6));
}

export function shapeText(shape: number[] | null | undefined): string {
  return Array.isArray(shape) ? `[${shape.join(", ")}]` : "-";
}

/** "Tensor[1024, 4096] float32 cuda:0 norm=3.2e+01 nan=0": one summary on one line. */
export function summaryText(s: TensorSummary): string {
  if (s.error) {
    return `<${s.error}>`;
  }
  if (s.value !== undefined && s.hash === undefined) {
    return s.value;
  }
  const short = (x: number | null | undefined) => (typeof x === "number" ? pyExponent(x.toExponential(1)) : "-");
  const parts = [`Tensor${shapeText(s.shape)}`, s.dtype ?? "", s.device ?? "", `norm=${short(s.norm)}`, `mean=${short(s.mean)}`];
  if (s.nan) {
    parts.push(`nan=${s.nan}`);
  }
  if (s.inf) {
    parts.push(`inf=${s.inf}`);
  }
  return parts.filter(Boolean).join(" ");
}

function cellText(s: TensorSummary, col: StatColumn): string {
  switch (col) {
    case "shape":
      return shapeText(s.shape);
    case "dtype":
    case "device":
      return s[col] ?? "-";
    case "hash":
      return s.hash ? s.hash.slice(0, HASH_CHARS) : "-";
    default:
      return formatNumber(s[col]);
  }
}

/** Which columns the broker's reason names ("hash differs…; norm 1.2e-03 relative off…"). */
export function markedColumns(why: string | null | undefined): boolean[] {
  const text = why ?? "";
  const names = (col: StatColumn) => {
    switch (col) {
      case "hash":
        return /\bhash\b/.test(text);
      case "nan":
      case "inf":
        return false;
      default:
        return new RegExp(`(^|; )${col}\\b`).test(text);
    }
  };
  return STAT_COLUMNS.map(names);
}

function compareRank(a: number | null, b: number | null): number {
  return (a ?? Number.POSITIVE_INFINITY) - (b ?? Number.POSITIVE_INFINITY);
}

export function tableRow(rank: number | null, worker: string, s: TensorSummary): TensorTableRow {
  const why = s.differs ? (s.why ?? "differs from the majority") : "";
  return {
    rank,
    worker,
    cells: STAT_COLUMNS.map((c) => cellText(s, c)),
    marked: s.differs ? markedColumns(s.why) : STAT_COLUMNS.map(() => false),
    note: s.error ?? (s.hash === undefined && s.value !== undefined ? s.value : ""),
    isError: Boolean(s.error),
    differs: Boolean(s.differs),
    why,
    summary: summaryText(s),
  };
}

function group(name: string, step: number | string | null, rows: TensorTableRow[]): TensorGroup {
  rows.sort((a, b) => compareRank(a.rank, b.rank) || a.worker.localeCompare(b.worker));
  return { name, step, rows, flagged: rows.filter((r) => r.differs).map((r) => r.rank), hasNotes: rows.some((r) => r.note !== "") };
}

/** GET /v1/inspect's rows as one group per entry and step, in the broker's order (name, step). */
export function inspectGroups(rows: readonly InspectRow[]): TensorGroup[] {
  const groups = new Map<string, { name: string; step: number | string | null; rows: TensorTableRow[] }>();
  for (const r of rows) {
    const key = `${r.name}\u0000${String(r.step)}`;
    let g = groups.get(key);
    if (!g) {
      g = { name: r.name, step: r.step, rows: [] };
      groups.set(key, g);
    }
    g.rows.push(tableRow(r.rank, r.worker, r));
  }
  return [...groups.values()].map((g) => group(g.name, g.step, g.rows));
}

/**
 * A snapshot point's expression values as one group per entry: each worker's first
 * `perWorker` captures (a one-shot point: one), flagged as the broker flagged them
 * (GET /v1/snapshots/{id}; rows from the stream carry no flags until read back).
 */
export function compareGroups(rows: readonly SnapshotRow[], perWorker = 1): TensorGroup[] {
  const seen = new Map<string, number>();
  const groups = new Map<string, { step: number; rows: TensorTableRow[] }>();
  const timeOf = (t: number | string) => (typeof t === "number" ? t : Date.parse(t) / 1000 || 0);
  for (const r of [...rows].sort((a, b) => timeOf(a.time) - timeOf(b.time))) {
    if (!r.values?.length) {
      continue;
    }
    const nth = seen.get(r.worker) ?? 0;
    seen.set(r.worker, nth + 1);
    if (nth >= perWorker) {
      continue;
    }
    for (const v of r.values) {
      const key = `${nth}\u0000${v.name}`;
      let g = groups.get(key);
      if (!g) {
        g = { step: nth, rows: [] };
        groups.set(key, g);
      }
      g.rows.push(tableRow(r.rank, r.worker, v));
    }
  }
  return [...groups.entries()].map(([key, g]) => group(key.split("\u0000")[1], perWorker > 1 ? g.step + 1 : null, g.rows));
}

/** Distinct workers with a capture that has values (how far a compare has come). */
export function capturedWorkers(rows: readonly SnapshotRow[]): number {
  return new Set(rows.filter((r) => r.values?.length).map((r) => r.worker)).size;
}

/** "rank 2 differs (hash differs from the majority (3 of 4))" or "all 4 ranks agree", for one group. */
export function groupVerdict(g: TensorGroup): string {
  const flagged = g.rows.filter((r) => r.differs);
  if (g.rows.length < 2) {
    return g.rows.length ? "only one rank so far: nothing to compare with" : "no rank yet";
  }
  if (!flagged.length) {
    return `all ${g.rows.length} ranks agree`;
  }
  return flagged.map((r) => `${r.rank === null ? `worker ${r.worker.slice(0, 8)}` : `rank ${r.rank}`} differs (${r.why})`).join("; ");
}

/**
 * Of one name's rows at every kept step (GET /v1/inspect?step=all): those of the newest step that
 * as many ranks have sent as any step has. The broker's own latest step is usually one only the
 * fastest rank has sent yet (each rank's rows come with its own heartbeat).
 */
export function newestCompleteStep(rows: readonly InspectRow[]): InspectRow[] {
  const bySteps = new Map<string, InspectRow[]>();
  for (const r of rows) {
    const key = String(r.step);
    bySteps.set(key, [...(bySteps.get(key) ?? []), r]);
  }
  const ranks = (rs: InspectRow[]) => new Set(rs.map((r) => r.worker)).size;
  const most = Math.max(0, ...[...bySteps.values()].map(ranks));
  let best: InspectRow[] = [];
  let bestTime = Number.NEGATIVE_INFINITY;
  for (const rs of bySteps.values()) {
    const t = Math.max(...rs.map((r) => r.time ?? 0));
    if (ranks(rs) === most && t >= bestTime) {
      best = rs;
      bestTime = t;
    }
  }
  return best;
}

/** Names and steps of the inspect rows, for the pickers: [{name, steps (newest first), ranks, flagged}]. */
export interface InspectName {
  name: string;
  steps: (number | string | null)[];
  ranks: number;
  /** Rows flagged at the newest step. */
  flagged: number;
}

export function inspectNames(rows: readonly InspectRow[]): InspectName[] {
  const out = new Map<string, InspectName>();
  for (const r of rows) {
    let n = out.get(r.name);
    if (!n) {
      n = { name: r.name, steps: [], ranks: 0, flagged: 0 };
      out.set(r.name, n);
    }
    if (!n.steps.some((s) => String(s) === String(r.step))) {
      n.steps.push(r.step);
    }
  }
  for (const n of out.values()) {
    n.steps.sort((a, b) => (typeof a === "number" && typeof b === "number" ? b - a : String(b).localeCompare(String(a))));
    const latest = rows.filter((r) => r.name === n.name && String(r.step) === String(n.steps[0]));
    n.ranks = new Set(latest.map((r) => r.worker)).size;
    n.flagged = latest.filter((r) => r.differs).length;
  }
  return [...out.values()];
}
