// raySleuth.setBreakpointRanks: writes a `[rank 0,2]` scope into the condition
// of the breakpoint at the cursor line (creating it when there is none). VS Code
// breakpoints are immutable, so the old one is removed and a new one added.
import * as path from "path";
import * as vscode from "vscode";
import * as vsapi from "../common/vscodeapi";
import { ClusterState } from "../cluster/clusterState";
import { pickRanks } from "../cluster/rankPicker";
import { rankScopeOf, setRankScope } from "./rankScope";

/** The source breakpoint of this file on this 0-based line, if any. */
export function breakpointAt(uri: vscode.Uri, line: number): vscode.SourceBreakpoint | undefined {
  const want = uri.toString();
  return vscode.debug.breakpoints.find(
    (bp): bp is vscode.SourceBreakpoint => bp instanceof vscode.SourceBreakpoint && bp.location.uri.toString() === want && bp.location.range.start.line === line,
  );
}

export class RankBreakpointEditor {
  constructor(private readonly state: ClusterState) {}

  /**
   * Gives the breakpoint at uri:line (0-based) the scope `[rank <ranks>]`
   * (no ranks: no rank scope); other scopes, the Python condition, hit count,
   * log message and enabled state are kept. Returns the new breakpoint.
   */
  setRanksAt(uri: vscode.Uri, line: number, ranks: readonly number[]): vscode.SourceBreakpoint {
    const old = breakpointAt(uri, line);
    const condition = setRankScope(old?.condition, ranks);
    const location = old?.location ?? new vscode.Location(uri, new vscode.Position(line, 0));
    const bp = new vscode.SourceBreakpoint(location, old?.enabled ?? true, condition, old?.hitCondition, old?.logMessage);
    if (old) {
      vscode.debug.removeBreakpoints([old]);
    }
    vscode.debug.addBreakpoints([bp]);
    return bp;
  }

  /** The command: the active editor's cursor line, a pick of the cluster's ranks. */
  async command(): Promise<vscode.SourceBreakpoint | undefined> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vsapi.showInformationMessage("Ray Sleuth: open a Python file and put the cursor on the line first.");
      return undefined;
    }
    const uri = editor.document.uri;
    const line = editor.selection.active.line;
    const old = breakpointAt(uri, line);
    const ranks = await pickRanks(this.state, {
      title: `Ray Sleuth: ranks for the breakpoint at ${path.basename(uri.fsPath)}:${line + 1}`,
      placeHolder: "Tick the ranks that stop here (none ticked: every rank)",
      preselect: rankScopeOf(old?.condition),
    });
    if (ranks === undefined) {
      return undefined;
    }
    return this.setRanksAt(uri, line, ranks);
  }
}
