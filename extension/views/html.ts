// Builds the static HTML of the result panels: escaping, one stylesheet on the
// theme's colours, a CSP that allows no script. Pure text, no vscode import.

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);
}

/** A cell's text, cut to `max` characters (the full text in its tooltip). */
export function cell(text: string, cls: string[] = [], max = 300): string {
  const shown = text.length > max ? `${text.slice(0, max)}…` : text;
  const attr = cls.length ? ` class="${cls.join(" ")}"` : "";
  return `<td${attr} title="${escapeHtml(text)}">${escapeHtml(shown)}</td>`;
}

const STYLE = `
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); padding: 0 12px; }
h2 { font-size: 1.1em; font-weight: 600; }
.meta { color: var(--vscode-descriptionForeground); margin-bottom: 8px; }
table { border-collapse: collapse; }
th, td { border: 1px solid var(--vscode-panel-border, #8884); padding: 2px 8px; text-align: left; vertical-align: top;
  font-family: var(--vscode-editor-font-family); white-space: pre-wrap; max-width: 40em; overflow-wrap: anywhere; }
th { background: var(--vscode-editorWidget-background); }
td.differs { background: var(--vscode-diffEditor-insertedTextBackground, #fc06); outline: 1px solid var(--vscode-editorWarning-foreground, #c90); }
td.error { color: var(--vscode-errorForeground); }
td.missing { color: var(--vscode-disabledForeground); }
`;

export function page(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline';">
<title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body>${body}</body></html>`;
}
