// "Ray Sleuth: Run Doctor": asks the broker for `raysleuth doctor`'s report
// (GET /v1/doctor: the broker's and every node's checks) and shows it in a
// webview panel, refreshed on each run. Never runs a check itself.
import * as vscode from "vscode";
import { log } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import type { BrokerAccess } from "../broker/brokerConnection";
import { DoctorReport, doctorHtml, doctorSummary } from "./doctorReport";

export const DOCTOR_VIEW_TYPE = "raySleuth.doctor";

export class DoctorService implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  /** The last report shown (tests read it). */
  last: DoctorReport | undefined;

  constructor(private readonly broker: BrokerAccess) {}

  /** Runs the doctor and shows its report; undefined when the broker could not be asked (told). */
  async run(): Promise<DoctorReport | undefined> {
    const client = await this.broker.ensureClient();
    if (!client) {
      return undefined;
    }
    let report: DoctorReport;
    try {
      // Every node's relay runs its checks: seconds on a big cluster.
      report = await vsapi.withProgress("Ray Sleuth: running the doctor on every node…", () => client.requestJson<DoctorReport>("GET", "/v1/doctor"));
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: the doctor could not run: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
    log.info(`Doctor: ${doctorSummary(report)}`);
    this.last = report;
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(DOCTOR_VIEW_TYPE, "Ray Sleuth: Doctor", vscode.ViewColumn.Active, { enableScripts: false });
      this.panel.onDidDispose(() => (this.panel = undefined));
    }
    this.panel.webview.html = doctorHtml(report, new Date());
    this.panel.reveal();
    return report;
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
