// raySleuth.pickWorker: a quick pick of the live workers; returns the chosen
// worker's id (what "${command:raySleuth.pickWorker}" puts into a launch config).
import * as vscode from "vscode";
import { ClusterState } from "./clusterState";
import * as vsapi from "../common/vscodeapi";
import { workerPickItems } from "./workerGrouping";

export async function pickWorker(state: ClusterState, ensureConnected: () => Promise<boolean>): Promise<string | undefined> {
  if (state.status !== "connected" && !(await ensureConnected())) {
    return undefined; // the connection has told the user why
  }
  const items = workerPickItems(state.workers);
  if (items.length === 0) {
    void vsapi.showInformationMessage("Ray Sleuth: no live worker with an agent to attach to. Start the job with RAYSLEUTH=1, then refresh the Cluster view.");
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(items, {
    title: "Ray Sleuth: attach to a worker",
    placeHolder: "Pick a worker (paused ones first)",
    matchOnDescription: true,
    matchOnDetail: true,
  });
  return picked?.workerId;
}
