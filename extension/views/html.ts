// Builds the static HTML of the result panels (Evaluate, Capture Here):
// escaping, one stylesheet on the theme's colours, a CSP that allows no script.
// Pure text, no vscode import.
import { EvaluateRow, SnapshotTable } from "./resultTables";
import { multiLine } from "../common/textSafe";

/**
 * Text as HTML: markup escaped, and every control, bidi or invisible character shown escaped
 * (`\u202e`), so a value or name from the cluster cannot reorder or hide what a panel shows (#37).
 */
export function escapeHtml(text: string): string {
  return multiLine(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);
}

/** A cell's text, cut to `max` characters (the full text in its tooltip). */
export function cell(text: string, cls: string[] = [], max = 300): string {
  const shown = text.length > max ? `${text.slice(0, max)}…` : text;
  const attr = cls.length ? ` class="${cls.join(" ")}"` : "";
  return `<td${attr} title="${escapeHtml(text)}">${escapeHtml(shown)}</td>`;
}

/** One card of the narrow layout: a title, then `name: value` lines (a value cut to 300 characters). */
export function card(title: string, lines: readonly { name: string; value: string | undefined; cls: string[] }[]): string {
  const body = lines.map(({ name, value, cls }) => {
    const shown = value === undefined ? "—" : value.length > 300 ? `${value.slice(0, 300)}…` : value;
    return `<div${cls.length ? ` class="${cls.join(" ")}"` : ""} title="${escapeHtml(value ?? "")}"><span class="name">${escapeHtml(name)}:</span> ${escapeHtml(shown)}</div>`;
  });
  return `<div class="card"><h3>${escapeHtml(title)}</h3>${body.join("")}</div>`;
}

const STYLE = `
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); padding: 0 12px; }
h2 { font-size: 1.1em; font-weight: 600; }
.meta { color: var(--vscode-descriptionForeground); margin-bottom: 8px; }
table { border-collapse: collapse; }
th, td { border: 1px solid var(--vscode-panel-border, #8884); padding: 2px 8px; text-align: left; vertical-align: top;
  font-family: var(--vscode-editor-font-family); white-space: pre-wrap; max-width: 40em; overflow-wrap: anywhere; }
th { background: var(--vscode-editorWidget-background); white-space: nowrap; overflow-wrap: normal; }
td.differs { background: var(--vscode-diffEditor-insertedTextBackground, #fc06); outline: 1px solid var(--vscode-editorWarning-foreground, #c90); }
td.error { color: var(--vscode-errorForeground); }
td.missing { color: var(--vscode-disabledForeground); }
.wide { overflow-x: auto; }
.cards { display: none; }
.card { border: 1px solid var(--vscode-panel-border, #8884); margin: 6px 0; padding: 4px 8px; }
.card h3 { font-size: 1em; margin: 0 0 4px; }
.card div { font-family: var(--vscode-editor-font-family); overflow-wrap: anywhere; }
.card .differs { background: var(--vscode-diffEditor-insertedTextBackground, #fc06); }
.card .name { color: var(--vscode-descriptionForeground); }
/* A narrow editor: one card per capture (name: value lines) instead of a wide table. */
@media (max-width: 640px) { .wide { display: none; } .cards { display: block; } }
`;

export function page(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline';">
<title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body>${body}</body></html>`;
}

/** The panel's HTML for one expression's rows. */
export function evaluateHtml(expression: string, rows: readonly EvaluateRow[]): string {
  const differing = rows.filter((r) => r.differs).length;
  const meta = rows.length
    ? `${rows.length} paused worker${rows.length === 1 ? "" : "s"}${differing ? ` · ${differing} differ${differing === 1 ? "s" : ""} from the others` : " · all agree"}`
    : "No worker is paused.";
  const body = rows
    .map((r) => {
      const cls = [...(r.isError ? ["error"] : []), ...(r.differs ? ["differs"] : [])];
      return `<tr>${cell(r.rank === null ? "-" : String(r.rank))}${cell(r.worker.slice(0, 12))}${cell(r.text, cls, 2000)}</tr>`;
    })
    .join("\n");
  return page(
    `Evaluate ${expression}`,
    `<h2><code>${escapeHtml(expression)}</code> on every paused rank</h2><div class="meta">${escapeHtml(meta)}</div>` +
      (rows.length ? `<table><thead><tr><th>rank</th><th>worker</th><th>value</th></tr></thead><tbody>${body}</tbody></table>` : ""),
  );
}

function timeText(t: number | string): string {
  const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toISOString().slice(11, 23);
}

/**
 * The panel's HTML for one snapshot point; `note` says how it captures (e.g. that it is one-shot);
 * `values`: the HTML of its expressions compared across ranks (tensorHtml.ts), shown first.
 */
export function snapshotHtml(title: string, table: SnapshotTable, note = "", values = ""): string {
  const meta =
    (table.rows.length
      ? `${table.rows.length} capture${table.rows.length === 1 ? "" : "s"} · marked cells differ between ranks (object addresses do not count)`
      : "Waiting for a worker to pass the line…") + (note ? ` · ${note}` : "");
  const head = `<tr><th>rank</th><th>worker</th><th>time</th><th>where</th>${table.columns.map((c) => `<th>${escapeHtml(c)}</th>`).join("")}</tr>`;
  const body = table.rows
    .map(
      (r) =>
        `<tr>${cell(r.rank === null ? "-" : String(r.rank))}${cell(r.worker.slice(0, 12))}${cell(timeText(r.time))}${cell(r.where)}` +
        r.cells.map((v, j) => cell(v ?? "—", [...(v === undefined ? ["missing"] : []), ...(r.differs[j] ? ["differs"] : [])])).join("") +
        `</tr>`,
    )
    .join("\n");
  const cards = table.rows
    .map((r) =>
      card(
        `${r.rank === null ? "no rank" : `rank ${r.rank}`} · ${timeText(r.time)} · ${r.where}`,
        table.columns.map((c, j) => {
          const v = r.cells[j];
          return { name: c, value: v, cls: [...(v === undefined ? ["missing"] : []), ...(r.differs[j] ? ["differs"] : [])] };
        }),
      ),
    )
    .join("\n");
  return page(
    title,
    `<h2>${escapeHtml(title)}</h2><div class="meta">${escapeHtml(meta)}</div>${values}` +
      (values ? "<h3>Locals of the innermost frame</h3>" : "") +
      `<div class="wide"><table><thead>${head}</thead><tbody>${body}</tbody></table></div><div class="cards">${cards}</div>`,
  );
}
