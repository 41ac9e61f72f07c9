// raySleuth.evaluateAll: evaluates one expression in every paused worker
// (POST /v1/evaluate) and shows rank → value in a webview panel, the values
// that differ from the majority highlighted. An expression the broker refuses
// as unbounded is sent again with `force` only after a modal "Run anyway"; a
// worker an evaluate left busy (C code holds its GIL) is offered "End worker".
import * as vscode from "vscode";
import { log } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import type { BrokerAccess } from "../broker/brokerConnection";
import type { BrokerClient } from "../broker/brokerClient";
import { EvaluateAnswer, busyRows, busyText, evaluateBody, forceableRefusal } from "./evaluateGuard";
import { evaluateHtml } from "./html";
import { EvaluateRow, evaluateRows } from "./resultTables";

export const EVALUATE_VIEW_TYPE = "raySleuth.evaluate";
const RUN_ANYWAY = "Run anyway";
const END_WORKER = "End worker";

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
    let answers: EvaluateAnswer[] | undefined;
    try {
      answers = await this.send(client, expression, ranks);
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: evaluating "${expression}" failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
    if (!answers) {
      return undefined;
    }
    const rows = evaluateRows(answers);
    log.info(`Evaluated "${expression}" on ${rows.length} paused worker(s)`);
    this.last = { expression, rows };
    this.show(expression, rows);
    void this.offerToEnd(client, answers);
    return rows;
  }

  /** POST /v1/evaluate; a refusal as unbounded asks before sending it again with `force` (undefined: not sent). */
  private async send(client: BrokerClient, expression: string, ranks?: number[]): Promise<EvaluateAnswer[] | undefined> {
    try {
      return await client.requestJson<EvaluateAnswer[]>("POST", "/v1/evaluate", evaluateBody(expression, ranks, false));
    } catch (err) {
      const refused = forceableRefusal(err);
      if (!refused) {
        throw err;
      }
      const picked = await vscode.window.showWarningMessage(`Ray Sleuth: ${refused.error}`, { modal: true, detail: refused.hint }, RUN_ANYWAY);
      if (picked !== RUN_ANYWAY) {
        return undefined;
      }
      log.warn(`Evaluating "${expression}" anyway (force), as the user chose`);
      return client.requestJson<EvaluateAnswer[]>("POST", "/v1/evaluate", evaluateBody(expression, ranks, true));
    }
  }

  /** A worker the evaluate left busy: offered to end it (POST /v1/workers/{id}/kill), after a modal confirmation. */
  private async offerToEnd(client: BrokerClient, answers: readonly EvaluateAnswer[]): Promise<void> {
    for (const row of busyRows(answers)) {
      const picked = await vsapi.showWarningMessage(`Ray Sleuth: ${busyText(row)}.`, END_WORKER);
      if (picked !== END_WORKER) {
        continue;
      }
      const sure = await vscode.window.showWarningMessage(
        `End worker ${row.worker.slice(0, 8)}${row.rank === null ? "" : ` (rank ${row.rank})`}?`,
        { modal: true, detail: "Its process is killed (SIGKILL): Ray fails its task or restarts its actor, as after a crash." },
        END_WORKER,
      );
      if (sure !== END_WORKER) {
        continue;
      }
      try {
        await client.requestJson("POST", `/v1/workers/${encodeURIComponent(row.worker)}/kill`, {});
        void vsapi.showInformationMessage(`Ray Sleuth: ended worker ${row.worker.slice(0, 8)}.`);
      } catch (err) {
        void vsapi.showErrorMessage(`Ray Sleuth: ending worker ${row.worker.slice(0, 8)} failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
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
