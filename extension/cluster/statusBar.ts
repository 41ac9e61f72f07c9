// The "Ray: N workers" status bar item; a click focuses the Cluster view.
import * as vscode from "vscode";
import { Commands } from "../constants";
import { createStatusBarItem } from "../common/vscodeapi";
import { ClusterState } from "./clusterState";
import { statusText } from "./statusText";

export class ClusterStatusBar implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  private readonly subscription: vscode.Disposable;

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
    this.item.tooltip =
      this.state.status === "disconnected" ? "Ray Sleuth: not connected. Click to open the Cluster view." : `Ray Sleuth: ${this.state.status}${where}. Click to open the Cluster view.`;
  }

  dispose(): void {
    this.subscription.dispose();
    this.item.dispose();
  }
}
