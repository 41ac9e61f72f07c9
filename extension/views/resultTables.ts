// Pure shaping of the cross-rank tables: evaluate results (rank → value) and
// snapshot rows (rank × local variable), with the cells that stand out from the
// others marked. No vscode import, so it is tested without a window.
import { EvaluateResult, SnapshotRow } from "../broker/types";
import type { TensorSummary } from "../broker/telemetryTypes";
import { formatNumber, shapeText, summaryText } from "./tensorTable";

/**
 * Which cells of one column differ. All equal: none. One value most common:
 * every cell that is not it. No single most common value (a tie, e.g. two ranks
 * with two values): every cell. A missing cell counts as a value of its own.
 */
export function divergentCells(values: readonly (string | undefined)[]): boolean[] {
  const MISSING = "\u0000missing";
  const keys = values.map((v) => (v === undefined ? MISSING : comparableValue(v)));
  const counts = new Map<string, number>();
  for (const k of keys) {
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  if (counts.size <= 1) {
    return keys.map(() => false);
  }
  const top = Math.max(...counts.values());
  const leaders = [...counts].filter(([, n]) => n === top).map(([k]) => k);
  if (leaders.length > 1) {
    return keys.map(() => true);
  }
  return keys.map((k) => k !== leaders[0]);
}

/**
 * A repr as compared across ranks: object addresses ("<Trainer object at
 * 0x7f3a...>") differ in every process and say nothing, so they do not count
 * (issue #13: `self` was always flagged).
 */
export function comparableValue(repr: string): string {
  return repr.replace(/ at 0x[0-9a-fA-F]+/g, " at 0x…");
}

function compareRank(a: number | null, b: number | null): number {
  return (a ?? Number.POSITIVE_INFINITY) - (b ?? Number.POSITIVE_INFINITY);
}

export interface EvaluateRow {
  rank: number | null;
  worker: string;
  /** The value's repr, or the error text. */
  text: string;
  isError: boolean;
  /** True when this row's result is not the majority's. */
  differs: boolean;
}

/** One row per paused worker, by rank; a result differs when it is not the majority's (errors included). */
export function evaluateRows(results: readonly EvaluateResult[]): EvaluateRow[] {
  const sorted = [...results].sort((a, b) => compareRank(a.rank, b.rank) || a.worker.localeCompare(b.worker));
  const isError = (r: EvaluateResult) => r.value === undefined && r.error !== undefined;
  // A tensor is compared on its shape, dtype and content hash (its repr says little), and shown
  // with its statistics and the hash's head, so the row that differs says how.
  const tensor = (s: TensorSummary) => `${summaryText(s)} std=${formatNumber(s.std)} hash=${(s.hash ?? "-").slice(0, 8)}`;
  const text = (r: EvaluateResult) => (isError(r) ? String(r.error) : r.summary ? tensor(r.summary) : String(r.value ?? ""));
  const key = (r: EvaluateResult) => (isError(r) ? `error: ${text(r)}` : r.summary ? `${shapeText(r.summary.shape)} ${r.summary.dtype} ${r.summary.hash ?? text(r)}` : text(r));
  const differs = divergentCells(sorted.map(key));
  return sorted.map((r, i) => ({ rank: r.rank, worker: r.worker, text: text(r), isError: isError(r), differs: differs[i] }));
}

export interface SnapshotTableRow {
  rank: number | null;
  worker: string;
  time: number | string;
  /** Where the innermost frame was, e.g. "work (bp_job.py:33)". */
  where: string;
  /** One cell per column; undefined where this capture had no such local. */
  cells: (string | undefined)[];
  differs: boolean[];
}

export interface SnapshotTable {
  /** Names of the innermost frame's locals, in the order first seen. */
  columns: string[];
  rows: SnapshotTableRow[];
}

function timeValue(t: number | string): number {
  return typeof t === "number" ? t : Date.parse(t) / 1000 || 0;
}

function baseName(p: string): string {
  return p.split(/[\\/]/).pop() ?? p;
}

/**
 * Rank × variable over the innermost frame of each capture, rows by rank then time.
 * `perWorker`: the point's count, captures per worker; later rows of a worker beyond it are
 * not shown (a one-shot capture shows one row per worker, and its count stops there).
 */
export function snapshotTable(rows: readonly SnapshotRow[], perWorker?: number): SnapshotTable {
  let sorted = [...rows].sort((a, b) => compareRank(a.rank, b.rank) || timeValue(a.time) - timeValue(b.time) || a.worker.localeCompare(b.worker));
  if (perWorker !== undefined) {
    const seen = new Map<string, number>();
    sorted = sorted.filter((r) => {
      const n = (seen.get(r.worker) ?? 0) + 1;
      seen.set(r.worker, n);
      return n <= perWorker;
    });
  }
  const columns: string[] = [];
  for (const r of sorted) {
    for (const name of Object.keys(r.frames[0]?.locals ?? {})) {
      if (!columns.includes(name)) {
        columns.push(name);
      }
    }
  }
  const cells = sorted.map((r) => columns.map((c) => r.frames[0]?.locals?.[c]));
  const byColumn = columns.map((_, j) => divergentCells(cells.map((row) => row[j])));
  return {
    columns,
    rows: sorted.map((r, i) => {
      const f = r.frames[0];
      return {
        rank: r.rank,
        worker: r.worker,
        time: r.time,
        where: f ? `${f.function} (${baseName(f.path)}:${f.line})` : "",
        cells: cells[i],
        differs: byColumn.map((col) => col[i]),
      };
    }),
  };
}

/** A stable key for one captured row, to drop the same row arriving twice (stream and GET). */
export function snapshotRowKey(r: SnapshotRow): string {
  return `${r.worker}\u0000${String(r.time)}\u0000${r.rank ?? ""}`;
}
