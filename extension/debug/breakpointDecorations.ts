// Shows each cluster breakpoint's scope and armed count at the end of its line
// ("  ⟵ ranks 0,2 · armed on 2") with a hover, from ClusterBreakpointStore.
// Display only: it never changes a breakpoint.
import * as path from "path";
import * as vscode from "vscode";
import { ClusterBreakpoint } from "../broker/types";
import { ClusterBreakpointStore } from "./clusterBreakpointStore";
import { breakpointLineText, scopeLabel } from "./rankScope";

export interface LineAnnotation {
  /** 1-based. */
  line: number;
  text: string;
  hover: string;
}

/** The hover's markdown for the cluster breakpoints of one line. */
export function hoverText(bps: readonly ClusterBreakpoint[]): string {
  return bps
    .map((bp) => {
      const rows = [
        `**Ray Sleuth cluster breakpoint** — ${scopeLabel(bp.scope)}, armed on ${bp.armed} worker${bp.armed === 1 ? "" : "s"}`,
        bp.condition ? `condition: \`${bp.condition}\`` : "",
        bp.hitCondition ? `hit count: \`${bp.hitCondition}\`` : "",
        bp.logMessage ? `logs: \`${bp.logMessage}\`` : "",
      ];
      return rows.filter(Boolean).join("  \n");
    })
    .join("\n\n---\n\n");
}

export class BreakpointDecorations implements vscode.Disposable {
  private readonly type = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor("editorCodeLens.foreground"), fontStyle: "italic" },
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  private readonly disposables: vscode.Disposable[] = [this.type];

  constructor(private readonly store: ClusterBreakpointStore) {
    this.disposables.push(
      store.onDidChange(() => this.refresh()),
      vscode.window.onDidChangeVisibleTextEditors(() => this.refresh()),
      vscode.workspace.onDidChangeTextDocument((e) => {
        // Line ends move as the user types: redraw that document's annotations.
        if (vscode.window.visibleTextEditors.some((ed) => ed.document === e.document)) {
          this.refresh();
        }
      }),
    );
    this.refresh();
  }

  /** What the lines of a file show now, one entry per line (tests read this). */
  annotations(fsPath: string): LineAnnotation[] {
    const byLine = new Map<number, ClusterBreakpoint[]>();
    for (const bp of this.store.forFile(fsPath)) {
      byLine.set(bp.line, [...(byLine.get(bp.line) ?? []), bp]);
    }
    return [...byLine]
      .sort(([a], [b]) => a - b)
      .map(([line, bps]) => ({
        line,
        text: bps.length === 1 ? breakpointLineText(bps[0]) : breakpointLineText({ scope: bps.map((b) => b.scope ?? "all").join("; "), armed: Math.max(...bps.map((b) => b.armed)) }),
        hover: hoverText(bps),
      }));
  }

  private refresh(): void {
    for (const editor of vscode.window.visibleTextEditors) {
      const doc = editor.document;
      if (doc.uri.scheme !== "file") {
        continue;
      }
      const options: vscode.DecorationOptions[] = [];
      for (const a of this.annotations(path.normalize(doc.uri.fsPath))) {
        if (a.line < 1 || a.line > doc.lineCount) {
          continue;
        }
        // The whole line: the text goes after its end, the hover shows over it.
        const range = doc.lineAt(a.line - 1).range;
        options.push({ range, hoverMessage: new vscode.MarkdownString(a.hover), renderOptions: { after: { contentText: a.text } } });
      }
      editor.setDecorations(this.type, options);
    }
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
