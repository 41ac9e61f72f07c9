// The chart webviews' colours (the editor theme's chart colours, read from the
// CSS variables VS Code sets on the page) and number and time formatting.
// Runs in the webview: DOM only, nothing of the extension host.

function cssVar(name: string, fallback: string): string {
  const v = getComputedStyle(document.body).getPropertyValue(name).trim();
  return v || fallback;
}

/** The theme's chart colours, read once per render (the theme may change between renders). */
export function palette() {
  return {
    foreground: cssVar("--vscode-foreground", "#ccc"),
    muted: cssVar("--vscode-descriptionForeground", "#999"),
    grid: cssVar("--vscode-charts-lines", "#8884"),
    background: cssVar("--vscode-editor-background", "#1e1e1e"),
    blue: cssVar("--vscode-charts-blue", "#3794ff"),
    red: cssVar("--vscode-charts-red", "#f14c4c"),
    yellow: cssVar("--vscode-charts-yellow", "#cca700"),
    orange: cssVar("--vscode-charts-orange", "#d18616"),
    green: cssVar("--vscode-charts-green", "#89d185"),
    purple: cssVar("--vscode-charts-purple", "#b180d7"),
    font: `${cssVar("--vscode-font-size", "12px")} ${cssVar("--vscode-font-family", "sans-serif")}`,
  };
}

export type Palette = ReturnType<typeof palette>;

/** Colours for many lines (one per worker on a node's chart): none of the fixed lines' colours. */
export function seriesColor(p: Palette, i: number): string {
  return [p.green, p.yellow, "#4ec9b0", "#c586c0", "#9cdcfe", "#ce9178"][i % 6];
}

const GIB = 2 ** 30;
const MIB = 2 ** 20;

export function bytesText(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) {
    return "-";
  }
  if (n === 0) {
    return "0";
  }
  if (Math.abs(n) >= GIB) {
    return `${Number((n / GIB).toFixed(2))} GiB`;
  }
  return Math.abs(n) >= MIB ? `${Math.round(n / MIB)} MiB` : `${Math.round(n / 1024)} KiB`;
}

/** "14:03:07.250" in the local time zone. */
export function timeText(seconds: number): string {
  const d = new Date(seconds * 1000);
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** Tick steps for a byte axis: powers of two from 1 MiB to 512 TiB, so ticks land on 2, 4, 8 GiB. */
export const BYTE_INCRS = Array.from({ length: 30 }, (_, i) => MIB * 2 ** i);
