// raySleuth.evaluateAll: evaluates one expression in every paused worker
// (POST /v1/evaluate) and shows rank → value in a webview panel, the values
// that differ from the majority highlighted.
import * as vscode from "vscode";
import { log } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import type { BrokerAccess } from "../broker/brokerConnection";
import { evaluateHtml } from "./html";
import { EvaluateRow, evaluateRows } from "./resultTables";

export const EVALUATE_VIEW_TYPE = "raySleuth.evaluate";

export class EvaluateService implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  /** The last expression and its rows, as shown (tests read them). */
  last: { expression: string; rows: EvaluateRow[] } | undefined;

  constructor(private readonly broker: BrokerAccess) {}

  /** Evaluates and shows the table; undefined when the broker could not be asked (already told). */
  async evaluate(expression: string, ranks?: number[]): Promise<EvaluateRow[] | undefined> {
    const client = await this.broker.ensureClient();
    if (!client) {
      return undefined;
    }
    let rows: EvaluateRow[];
    try {
      rows = evaluateRows(await client.evaluate(expression, ranks));
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: evaluating "${expression}" failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
    log.info(`Evaluated "${expression}" on ${rows.length} paused worker(s)`);
    this.last = { expression, rows };
    this.show(expression, rows);
    return rows;
  }

  /**
   * raySleuth.compareAcrossPausedRanks (issue 27): a variable of the Variables or Watch pane (its
   * evaluateName, else its name), or an expression, evaluated on every paused rank at once: a
   * rank × value table, tensor-aware, the ranks that differ marked. No new snapshot point.
   */
  async compareVariable(arg: unknown): Promise<EvaluateRow[] | undefined> {
    const v = (arg as { variable?: { evaluateName?: string; name?: string }; expression?: string } | undefined) ?? {};
    const expression = (typeof arg === "string" ? arg : (v.variable?.evaluateName ?? v.expression ?? v.variable?.name ?? "")).trim();
    if (!expression) {
      return this.command();
    }
    return this.evaluate(expression);
  }

  /** The command: ask for the expression (the selection by default). */
  async command(): Promise<EvaluateRow[] | undefined> {
    const editor = vscode.window.activeTextEditor;
    const selected = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection).trim() : "";
    const expression = await vscode.window.showInputBox({
      title: "Ray Sleuth: Evaluate on All Stopped Ranks",
      prompt: "A Python expression, evaluated in the top frame of every stopped rank",
      value: selected || this.last?.expression || "",
      validateInput: (v) => (v.trim() ? undefined : "Type an expression"),
    });
    return expression === undefined ? undefined : this.evaluate(expression.trim());
  }

  private show(expression: string, rows: readonly EvaluateRow[]): void {
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(EVALUATE_VIEW_TYPE, "Ray Sleuth: Evaluate", { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, { enableScripts: false });
      this.panel.onDidDispose(() => (this.panel = undefined));
    }
    this.panel.title = `Evaluate: ${expression.length > 30 ? `${expression.slice(0, 30)}…` : expression}`;
    this.panel.webview.html = evaluateHtml(expression, rows);
    this.panel.reveal(undefined, true);
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
