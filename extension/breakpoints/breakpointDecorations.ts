// Shows each cluster breakpoint's scope and armed count at the end of its line
// ("  ⟵ ranks 0,2 · armed on 2"), and the points other owners set ("  ⟵ set
// from the terminal: [rank 0] …"), with a hover, from ClusterBreakpointStore.
// Display only: it never changes a breakpoint.
import * as path from "path";
import * as vscode from "vscode";
import { LineAnnotation, lineAnnotations } from "./annotations";
import { ClusterBreakpointStore } from "./clusterBreakpointStore";

export type { LineAnnotation };

export class BreakpointDecorations implements vscode.Disposable {
  private readonly type = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor("editorCodeLens.foreground"), fontStyle: "italic" },
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  private readonly disposables: vscode.Disposable[] = [this.type];

  constructor(
    private readonly store: ClusterBreakpointStore,
    /** This window's owner name: its points are the editor's, every other owner's are shown as "set from …". */
    private readonly owner: string,
  ) {
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
    return lineAnnotations(this.store.forFile(fsPath), this.owner);
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
