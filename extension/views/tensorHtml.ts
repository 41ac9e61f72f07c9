// The static HTML of the cross-rank tensor tables (the inspect table, a
// compare's values): one table per entry and step, the flagged ranks' rows
// marked and the cells their reason names highlighted. Pure text, no script.
import { cell, escapeHtml, page } from "./html";
import { STAT_COLUMNS, TensorGroup, groupVerdict } from "./tensorTable";

const TENSOR_STYLE = `<style>
tr.flagged td { background: var(--vscode-inputValidation-warningBackground, #fc03); }
tr.flagged td:first-child { border-left: 3px solid var(--vscode-editorWarning-foreground, #c90); font-weight: 600; }
td.num { text-align: right; }
td.why { color: var(--vscode-editorWarning-foreground, #c90); }
.verdict.ok { color: var(--vscode-testing-iconPassed, #3a3); }
.verdict.bad { color: var(--vscode-editorWarning-foreground, #c90); font-weight: 600; }
h3 { font-size: 1em; margin: 14px 0 4px; }
.scroll { overflow-x: auto; }
.progress { margin: 6px 0; }
</style>`;

const NUMERIC = new Set<string>(["mean", "std", "min", "max", "norm", "nan", "inf"]);

function rankText(rank: number | null): string {
  return rank === null ? "-" : String(rank);
}

/** One group's heading, verdict and table. */
export function tensorGroupHtml(g: TensorGroup): string {
  const step = g.step === null || g.step === undefined ? "" : ` · step ${String(g.step)}`;
  const verdict = groupVerdict(g);
  const head =
    `<tr><th>rank</th><th>worker</th>${STAT_COLUMNS.map((c) => `<th>${c}</th>`).join("")}` +
    `${g.hasNotes ? "<th>value</th>" : ""}<th>why</th></tr>`;
  const body = g.rows
    .map((r) => {
      const cells = r.cells.map((text, j) => cell(text, [...(NUMERIC.has(STAT_COLUMNS[j]) ? ["num"] : []), ...(r.marked[j] ? ["differs"] : [])]));
      const note = g.hasNotes ? cell(r.note || "-", r.isError ? ["error"] : r.differs && !r.marked.some(Boolean) ? ["differs"] : [], 300) : "";
      return (
        `<tr class="${r.differs ? "flagged" : "agrees"}" data-rank="${escapeHtml(rankText(r.rank))}" title="${escapeHtml(r.summary)}">` +
        `${cell(rankText(r.rank))}${cell(r.worker.slice(0, 12))}${cells.join("")}${note}${cell(r.why || "", ["why"])}</tr>`
      );
    })
    .join("\n");
  return (
    `<h3><code>${escapeHtml(g.name)}</code>${escapeHtml(step)}</h3>` +
    `<div class="verdict ${g.flagged.length ? "bad" : "ok"}">${escapeHtml(verdict)}</div>` +
    `<div class="scroll"><table class="tensor"><thead>${head}</thead><tbody>${body}</tbody></table></div>`
  );
}

/** The groups alone (a compare's part of the snapshot panel). */
export function tensorGroupsHtml(groups: readonly TensorGroup[], empty: string): string {
  return TENSOR_STYLE + (groups.length ? groups.map(tensorGroupHtml).join("\n") : `<div class="meta">${escapeHtml(empty)}</div>`);
}

/** A whole panel: title, what it shows (`meta`), the groups. */
export function tensorPageHtml(title: string, meta: string, groups: readonly TensorGroup[], empty: string): string {
  return page(title, `<h2>${escapeHtml(title)}</h2><div class="meta">${escapeHtml(meta)}</div>${tensorGroupsHtml(groups, empty)}`);
}
