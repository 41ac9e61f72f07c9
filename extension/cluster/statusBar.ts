// The "Ray: N workers" status bar item; a click focuses the Cluster view.
import * as vscode from "vscode";
import { Commands } from "../constants";
import { createStatusBarItem } from "../common/vscodeapi";
import { ClusterState } from "./clusterState";
import { UNREACHABLE_AFTER_MS, statusText } from "./statusText";

export class ClusterStatusBar implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  private readonly subscription: vscode.Disposable;
  /** While reconnecting: the update that turns "reconnecting…" into "unreachable". */
  private lostTimer: NodeJS.Timeout | undefined;

  constructor(private readonly state: ClusterState) {
    this.item = createStatusBarItem("raySleuth.status", vscode.StatusBarAlignment.Left, 50);
    this.item.name = "Ray Sleuth";
    this.item.command = Commands.focusWorkers;
    this.subscription = state.onDidChange(() => this.update());
    this.update();
    this.item.show();
  }

  get text(): string {
    return this.item.text;
  }

  private update(): void {
    this.item.text = statusText(this.state);
    const where = this.state.brokerUrl ? ` (broker ${this.state.brokerUrl})` : "";
    const lost = this.state.lostSince;
    if (this.lostTimer) {
      clearTimeout(this.lostTimer);
      this.lostTimer = undefined;
    }
    if (this.state.status === "reconnecting" && lost !== undefined && Date.now() - lost < UNREACHABLE_AFTER_MS) {
      this.lostTimer = setTimeout(() => this.update(), UNREACHABLE_AFTER_MS - (Date.now() - lost) + 50);
    }
    this.item.tooltip =
      this.state.status === "disconnected"
        ? "Ray Sleuth: not connected. Click to open the Cluster view."
        : this.state.status === "reconnecting"
          ? `Ray Sleuth: the broker${where} does not answer since ${new Date(lost ?? Date.now()).toLocaleTimeString()}. Ray Sleuth keeps retrying and follows a broker that restarts (broker.json); Connect or Start Local Broker from the Cluster view's title. Click to open it.`
          : `Ray Sleuth: ${this.state.status}${where}. Click to open the Cluster view.`;
  }

  dispose(): void {
    if (this.lostTimer) {
      clearTimeout(this.lostTimer);
    }
    this.subscription.dispose();
    this.item.dispose();
  }
}
