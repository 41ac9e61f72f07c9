// The Cases view (issue 26): every failure the broker saw as a case that names the rank, the step
// and the line, newest first; a click opens its scene (the crash's session, the stacks, the
// comparison across ranks, the GPU memory chart).
import * as vscode from "vscode";
import { CASES_VIEW_ID, Commands } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { BrokerConnectionService } from "../broker/brokerConnection";
import type { CaseSummary } from "../broker/types";
import { CASE_ICONS, caseDescription, divergenceHtml, sceneOf } from "./caseModel";
import { markdownText, oneLine } from "../common/textSafe";

/** How the view opens each scene (services.ts wires the other views' commands in). */
export interface CaseScenes {
  inspectCrash(crashId: string): Promise<unknown>;
  showStacks(job: string | null): Promise<unknown>;
  showGpu(workerId: string): Promise<unknown>;
}

export const DIVERGENCE_VIEW_TYPE = "raySleuth.divergence";

export class CasesService implements vscode.TreeDataProvider<CaseSummary>, vscode.Disposable {
  cases: CaseSummary[] = [];
  readonly treeView: vscode.TreeView<CaseSummary>;
  /** The divergence table a click opened last (tests read its HTML). */
  divergencePanel: vscode.WebviewPanel | undefined;
  private readonly changed = new vscode.EventEmitter<CaseSummary | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly connection: BrokerConnectionService,
    private readonly scenes: CaseScenes,
  ) {
    this.treeView = vsapi.createTreeView<CaseSummary>(CASES_VIEW_ID, { treeDataProvider: this });
    this.disposables.push(
      this.treeView,
      this.changed,
      connection.onDidConnect(() => void this.refresh()),
      connection.onStreamEvent((e) => {
        if (e.event === "case") {
          void this.refresh();
        }
      }),
    );
  }

  async refresh(): Promise<void> {
    const client = this.connection.client;
    if (!client) {
      return;
    }
    try {
      this.cases = await client.requestJson<CaseSummary[]>("GET", "/v1/cases");
      this.treeView.badge = this.cases.length ? { value: this.cases.length, tooltip: `${this.cases.length} case${this.cases.length === 1 ? "" : "s"}` } : undefined;
      this.changed.fire(undefined);
    } catch (err) {
      swallow("Listing cases failed", err);
    }
  }

  /** raySleuth.openCase: the case's scene. */
  async open(target: unknown): Promise<void> {
    const id = typeof target === "string" ? target : (target as CaseSummary | undefined)?.id;
    const client = await this.connection.ensureClient();
    if (!id || !client) {
      return;
    }
    const full = await client.requestJson<CaseSummary & { evidence: Record<string, unknown> }>("GET", `/v1/cases/${encodeURIComponent(id)}`);
    const scene = sceneOf(full, full.evidence ?? {});
    log.info(`Case ${id} (${full.kind}): ${full.summary}`);
    switch (scene?.kind) {
      case "crash":
        await this.scenes.inspectCrash(scene.crash);
        return;
      case "hang":
        await this.scenes.showStacks(scene.job);
        return;
      case "memory":
        await this.scenes.showGpu(scene.worker);
        return;
      case "divergence":
        this.showDivergence(full.summary, full.evidence ?? {});
        return;
      default:
        void vsapi.showInformationMessage(`Ray Sleuth: ${oneLine(full.summary)}`);
    }
  }

  /**
   * raySleuth.watchDivergence: a first-divergence watch on the selected expression (or one typed)
   * at the cursor line, every rank; the divergence becomes a case in this view. Returns its id.
   */
  async watchSelection(args?: { path: string; line: number; expression: string; stop?: boolean }): Promise<string | undefined> {
    let target = args;
    if (!target) {
      const editor = vscode.window.activeTextEditor;
      if (!editor || editor.document.uri.scheme !== "file") {
        void vsapi.showInformationMessage("Ray Sleuth: select an expression in a Python file (e.g. grad) to watch it for divergence across ranks.");
        return undefined;
      }
      const selected = editor.selection.isEmpty ? "" : editor.document.getText(editor.selection).trim();
      const expression =
        selected ||
        (await vscode.window.showInputBox({
          title: "Ray Sleuth: Watch for Divergence Across Ranks",
          prompt: `A Python expression every rank evaluates each time it reaches line ${editor.selection.active.line + 1}; the first pass where a rank differs becomes a case`,
          validateInput: (v) => (v.trim() ? undefined : "Type an expression"),
        }))?.trim();
      if (!expression) {
        return undefined;
      }
      target = { path: editor.document.uri.fsPath, line: editor.selection.start.line + 1, expression };
    }
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    try {
      const { id } = await client.requestJson<{ id: string }>("POST", "/v1/watches", { path: target.path, line: target.line, expressions: [target.expression], stop: target.stop ?? false });
      log.info(`Watch ${id}: ${target.expression} at ${target.path}:${target.line}`);
      void vsapi.showInformationMessage(`Ray Sleuth: watching ${target.expression} at line ${target.line} on every rank; the first pass where a rank differs becomes a case in the Cases view.`);
      return id;
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: watching ${target.expression} failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
  }

  private showDivergence(summary: string, evidence: Record<string, unknown>): void {
    if (!this.divergencePanel) {
      this.divergencePanel = vscode.window.createWebviewPanel(DIVERGENCE_VIEW_TYPE, "Divergence across ranks", { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, { enableScripts: false });
      this.divergencePanel.onDidDispose(() => (this.divergencePanel = undefined));
    }
    this.divergencePanel.webview.html = divergenceHtml(summary, evidence);
    this.divergencePanel.reveal();
  }

  getTreeItem(c: CaseSummary): vscode.TreeItem {
    // A summary quotes the job's own text (an exception message, a name): shown escaped (#37).
    const item = new vscode.TreeItem(oneLine(c.summary), vscode.TreeItemCollapsibleState.None);
    item.id = c.id;
    item.description = oneLine(caseDescription(c));
    item.iconPath = new vscode.ThemeIcon(CASE_ICONS[c.kind] ?? "info");
    item.tooltip = new vscode.MarkdownString(
      [`**${markdownText(c.kind)}** · case ${markdownText(c.id)}`, "", markdownText(c.summary), "", markdownText(c.hint ?? "")].join("\n"),
    );
    item.contextValue = `case.${c.kind}`;
    item.command = { command: Commands.openCase, title: "Open", arguments: [c.id] };
    return item;
  }

  getChildren(element?: CaseSummary): CaseSummary[] {
    return element ? [] : this.cases;
  }

  dispose(): void {
    this.divergencePanel?.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
