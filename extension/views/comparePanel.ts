// raySleuth.compareAcrossRanks: the expression selected in a Python file,
// evaluated on every rank the next time each passes that line, with no code
// change: a one-shot snapshot point with `expressions` (POST /v1/snapshots),
// shown in the snapshot panel as rank × statistic with the flagged ranks
// marked; a notification tracks the ranks that have passed until all have.
import * as path from "path";
import * as vscode from "vscode";
import { log } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { formatRanks } from "../common/ranks";
import { SnapshotRequest } from "../broker/types";
import { ClusterState } from "../cluster/clusterState";
import { TensorGroup } from "./tensorTable";

/** What the compare needs of the snapshot view it opens (snapshotPanel.ts's SnapshotView). */
export interface CompareView {
  readonly id: string;
  /** Workers expected to pass the line (the view's progress). */
  expected: number | undefined;
  /** Distinct workers whose capture has the values. */
  readonly captured: number;
  /** Every captured value carries the broker's flags (read back after the stream's row). */
  readonly settled: boolean;
  readonly groups: TensorGroup[];
  readonly onDidChange: vscode.Event<void>;
  readonly onDidClose: vscode.Event<void>;
}

/** Starts a snapshot point and opens its view (SnapshotService.capture). */
export type CaptureFn = (request: SnapshotRequest, title: string) => Promise<CompareView | undefined>;

/** The command's arguments from a test or another command; absent: the active editor's selection. */
export interface CompareArgs {
  path: string;
  /** 1-based. */
  line: number;
  expression: string;
  ranks?: number[];
}

/** How long the progress notification waits for the ranks (the panel stays open after). */
const WAIT_MS = 10 * 60_000;

/** A Python expression at the cursor: the selection, else the dotted name under it (`self.model.fc.weight`). */
export function expressionAt(document: vscode.TextDocument, selection: vscode.Selection): string {
  if (!selection.isEmpty) {
    return document.getText(selection).trim().replace(/\s*\n\s*/g, " ");
  }
  const range = document.getWordRangeAtPosition(selection.active, /[A-Za-z_][\w.]*(\[[^\]\n]*\])?/);
  return range ? document.getText(range).replace(/\.$/, "") : "";
}

export class CompareService implements vscode.Disposable {
  /** The last compare's view (tests read it). */
  last: CompareView | undefined;

  constructor(
    private readonly state: ClusterState,
    private readonly capture: CaptureFn,
  ) {}

  /** The command: `args` from a caller, else the active Python editor's selection and line. */
  async command(args?: unknown): Promise<CompareView | undefined> {
    const a = args as Partial<CompareArgs> | undefined;
    if (a && typeof a.path === "string" && typeof a.line === "number" && typeof a.expression === "string") {
      return this.compare(a as CompareArgs);
    }
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.uri.scheme !== "file") {
      void vsapi.showInformationMessage("Ray Sleuth: select an expression in a Python file (e.g. self.model.fc.weight.grad) to compare it across ranks.");
      return undefined;
    }
    let expression = expressionAt(editor.document, editor.selection);
    if (editor.selection.isEmpty || !expression) {
      const typed = await vscode.window.showInputBox({
        title: "Ray Sleuth: compare across ranks",
        prompt: `A Python expression, evaluated on every rank when it next reaches line ${editor.selection.active.line + 1} (before the line runs)`,
        value: expression,
        validateInput: (v) => (v.trim() ? undefined : "Type an expression"),
      });
      if (!typed) {
        return undefined;
      }
      expression = typed.trim();
    }
    return this.compare({ path: path.normalize(editor.document.uri.fsPath), line: editor.selection.start.line + 1, expression });
  }

  /** Places the one-shot point, opens its view, and tracks the ranks in a notification. */
  async compare(args: CompareArgs): Promise<CompareView | undefined> {
    const uri = vscode.Uri.file(args.path);
    const root = vscode.workspace.getWorkspaceFolder(uri)?.uri.fsPath;
    const request: SnapshotRequest = {
      path: args.path,
      line: args.line,
      count: 1,
      expressions: [args.expression],
      ...(args.ranks?.length ? { ranks: args.ranks } : {}),
      ...(root ? { root } : {}),
    };
    const scope = args.ranks?.length ? `rank ${formatRanks(args.ranks)}` : "every rank";
    const view = await this.capture(request, `Compare ${args.expression} · ${path.basename(args.path)}:${args.line} · ${scope}`);
    if (!view) {
      return undefined;
    }
    view.expected = this.expectedWorkers(args.ranks) || undefined;
    this.last = view;
    log.info(`Compare across ranks: ${args.expression} at ${args.path}:${args.line} on ${scope} (snapshot ${view.id}, ${view.expected ?? "?"} ranks expected)`);
    void this.track(view, args.expression);
    return view;
  }

  /** Live ranked workers with an agent in scope: those expected to pass the line. */
  private expectedWorkers(ranks?: number[]): number {
    return this.state.workers.filter((w) => w.agent && w.state !== "exited" && w.rank !== null && (!ranks?.length || ranks.includes(w.rank))).length;
  }

  /** A cancellable notification: "2 of 4 ranks", until all passed, the view closed, or WAIT_MS. */
  private track(view: CompareView, expression: string): Thenable<void> {
    return vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Ray Sleuth: comparing ${expression} across ranks`, cancellable: true },
      (progress, token) =>
        new Promise<void>((resolve) => {
          let shown = -1;
          const subs: vscode.Disposable[] = [];
          const timer = setTimeout(() => finish(), WAIT_MS);
          const finish = () => {
            clearTimeout(timer);
            subs.forEach((d) => d.dispose());
            resolve();
          };
          const update = () => {
            const got = view.captured;
            if (got !== shown) {
              shown = got;
              const of = view.expected ? ` of ${view.expected}` : "";
              progress.report({ message: `waiting for the ranks to pass the line: ${got}${of} so far` });
            }
            if (view.expected && got >= view.expected && view.settled) {
              const flagged = view.groups.flatMap((g) => g.flagged);
              if (flagged.length) {
                const ranks = [...new Set(flagged)].map((r) => (r === null ? "a worker without rank" : `rank ${r}`)).join(", ");
                void vsapi.showWarningMessage(`Ray Sleuth: ${expression} differs on ${ranks} (see the table).`);
              }
              finish();
            }
          };
          subs.push(view.onDidChange(update), view.onDidClose(finish), token.onCancellationRequested(finish));
          update();
        }),
    );
  }

  dispose(): void {
    this.last = undefined;
  }
}
