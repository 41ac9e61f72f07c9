// The HTML of the chart webviews (GPU memory, timeline): a page that loads the
// bundled dist/webview/charts.js and .css (uPlot inside) from the extension,
// under a CSP that allows nothing but those local files and its own nonce'd
// script and style: no network. Pure text, no vscode import.
import { randomBytes } from "crypto";
import { escapeHtml } from "./html";

export interface ChartPageOptions {
  title: string;
  /** The webview's `cspSource` (its resource origin). */
  cspSource: string;
  /** asWebviewUri of dist/webview/charts.js and charts.css. */
  scriptUri: string;
  styleUri: string;
  /** The nonce of the page's one script and one style (a new one when absent). */
  nonce?: string;
}

export function newNonce(): string {
  return randomBytes(16).toString("base64").replace(/[^A-Za-z0-9]/g, "");
}

/** The Content-Security-Policy of a chart page: local scripts and styles only, by nonce. */
export function chartCsp(cspSource: string, nonce: string): string {
  return [
    "default-src 'none'",
    `img-src ${cspSource} data:`,
    `style-src ${cspSource} 'nonce-${nonce}'`,
    `script-src 'nonce-${nonce}'`,
    `font-src ${cspSource}`,
  ].join("; ");
}

const PAGE_STYLE = `
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); padding: 0 12px; }
h2 { font-size: 1.1em; font-weight: 600; margin: 10px 0 2px; }
.meta { color: var(--vscode-descriptionForeground); margin-bottom: 6px; }
#chart { width: 100%; position: relative; }
.empty { color: var(--vscode-descriptionForeground); margin: 12px 0; }
.tooltip { position: absolute; pointer-events: none; white-space: pre; z-index: 10; padding: 3px 6px;
  background: var(--vscode-editorHoverWidget-background, #252526); color: var(--vscode-editorHoverWidget-foreground, #ccc);
  border: 1px solid var(--vscode-editorHoverWidget-border, #454545); font-family: var(--vscode-editor-font-family); font-size: 12px; }
.u-legend { color: var(--vscode-foreground); font-size: 12px; }
.u-select { background: var(--vscode-editor-selectionBackground, #264f7880); }
`;

export function chartPageHtml(o: ChartPageOptions): string {
  const nonce = o.nonce ?? newNonce();
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${chartCsp(o.cspSource, nonce)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(o.title)}</title>
<link rel="stylesheet" href="${escapeHtml(o.styleUri)}">
<style nonce="${nonce}">${PAGE_STYLE}</style></head>
<body><h2 id="title">${escapeHtml(o.title)}</h2><div class="meta" id="subtitle">Loading…</div>
<div class="empty" id="empty" hidden></div><div id="chart"></div>
<script nonce="${nonce}" src="${escapeHtml(o.scriptUri)}"></script></body></html>`;
}
