// The Cases view's rows (issue 26): every failure the broker saw as a case, newest first, with the
// scene a click opens. Pure, no vscode import (plain mocha tests it).
import type { CaseKind, CaseSummary } from "../broker/types";
import { card, cell, escapeHtml as escape, page } from "./html";

/** The codicon of each kind. */
export const CASE_ICONS: Record<CaseKind, string> = {
  crash: "bug",
  hang: "watch",
  divergence: "git-compare",
  memory: "graph-line",
};

/** What a click opens: the crash's session, the stacks, the comparison, the memory chart. */
export type CaseScene =
  | { kind: "crash"; crash: string }
  | { kind: "hang"; job: string | null }
  | { kind: "divergence"; case: string }
  | { kind: "memory"; worker: string };

export function caseDescription(c: CaseSummary, now = Date.now()): string {
  const ago = Math.max(0, Math.round(now / 1000 - c.time));
  const when = ago < 60 ? `${ago} s ago` : ago < 3600 ? `${Math.round(ago / 60)} min ago` : new Date(c.time * 1000).toLocaleString();
  return `${c.kind} · ${when}`;
}

/** The scene of a case, from its evidence (GET /v1/cases/{id}); undefined when there is none to open. */
export function sceneOf(c: CaseSummary, evidence: Record<string, unknown>): CaseScene | undefined {
  switch (c.kind) {
    case "crash":
      return typeof evidence.crash === "string" ? { kind: "crash", crash: evidence.crash } : undefined;
    case "hang":
      return { kind: "hang", job: c.job_id };
    case "divergence":
      return { kind: "divergence", case: c.id };
    case "memory":
      return typeof evidence.worker === "string" ? { kind: "memory", worker: evidence.worker } : undefined;
    default:
      return undefined;
  }
}

/** The divergence's values per rank as rows of the comparison table: rank, statistics, flagged. */
export function divergenceRows(evidence: Record<string, unknown>): { rank: number; differs: boolean; cells: Record<string, unknown> }[] {
  const values = (evidence.values ?? {}) as Record<string, Record<string, unknown>>;
  const odd = new Set(Array.isArray(evidence.ranks) ? (evidence.ranks as number[]) : []);
  return Object.entries(values)
    .map(([rank, cells]) => ({ rank: Number(rank), differs: odd.has(Number(rank)), cells }))
    .sort((a, b) => a.rank - b.rank);
}

const STATS = ["shape", "dtype", "norm", "mean", "std", "min", "max", "hash", "value", "error"];

/** The comparison table of a divergence case: one row per rank, the differing ranks marked. */
export function divergenceHtml(summary: string, evidence: Record<string, unknown>): string {
  const rows = divergenceRows(evidence);
  const cols = STATS.filter((k) => rows.some((r) => r.cells[k] !== undefined && r.cells[k] !== null));
  const head = `<tr><th>rank</th>${cols.map((c) => `<th>${escape(c)}</th>`).join("")}</tr>`;
  const text = (v: unknown): string | undefined => (v === undefined ? undefined : typeof v === "string" ? v : JSON.stringify(v));
  const mark = (r: { differs: boolean }) => (r.differs ? ["differs"] : []);
  const body = rows.map((r) => `<tr>${cell(String(r.rank), mark(r))}${cols.map((c) => cell(text(r.cells[c]) ?? "—", mark(r))).join("")}</tr>`).join("");
  // A narrow editor (the panel opens beside the code) shows one card per rank instead of the table.
  const cards = rows.map((r) => card(`rank ${r.rank}${r.differs ? " · differs from the majority" : ""}`, cols.map((c) => ({ name: c, value: text(r.cells[c]), cls: mark(r) })))).join("");
  const where = `${escape(String(evidence.expression ?? "?"))} at pass ${escape(String(evidence.pass ?? "?"))}${evidence.step !== null && evidence.step !== undefined ? ` (step ${escape(String(evidence.step))})` : ""}; all agreed at pass ${escape(String(evidence.last_agreed_pass ?? "none"))}${evidence.last_agreed_step !== null && evidence.last_agreed_step !== undefined ? ` (step ${escape(String(evidence.last_agreed_step))})` : ""}`;
  return page(
    "Divergence across ranks",
    `<h2>Divergence across ranks</h2><div class="meta">${escape(summary)}</div><div class="meta">${where}</div><div class="wide"><table><thead>${head}</thead><tbody>${body}</tbody></table></div><div class="cards">${cards}</div>`,
  );
}
