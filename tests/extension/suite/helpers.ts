// Shared by the extension-host tests: the activated extension's API, the
// broker the test run points it at, and waiting on conditions (never sleeps).
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import type { ClusterTreeNode } from "../../../extension/cluster/workerTreeProvider";
import { DEBUG_TYPE, EXTENSION_ID } from "../../../extension/constants";
import { BrokerReadyInfo } from "../../../extension/broker/types";

export async function activateExtension(): Promise<RaySleuthApi> {
  const ext = vscode.extensions.getExtension<RaySleuthApi>(EXTENSION_ID);
  if (!ext) {
    throw new Error(`Extension ${EXTENSION_ID} is not loaded (is extensionDevelopmentPath right?)`);
  }
  const api = await ext.activate();
  await api.initialConnect;
  return api;
}

/** The broker the run started (the demo): read from raySleuth.stateDir, as the extension does. */
export function demoBroker(): { url: string; token: string; stateDir: string; rayAddress: string | undefined } {
  const stateDir = vscode.workspace.getConfiguration("raySleuth").get<string>("stateDir", "");
  if (!stateDir) {
    throw new Error("The test run must set raySleuth.stateDir in the user settings");
  }
  const info = JSON.parse(fs.readFileSync(path.join(stateDir, "broker.json"), "utf8")) as BrokerReadyInfo;
  return { url: info.http, token: fs.readFileSync(info.token_file, "utf8").trim(), stateDir, rayAddress: info.ray_address ?? undefined };
}

export async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) {
        return v;
      }
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface RenderedItem {
  kind: ClusterTreeNode["kind"];
  label: string;
  description: string;
  contextValue: string;
  icon: string;
  tooltip: string;
  depth: number;
}

/** Walks the Cluster view's data provider as VS Code would, and returns every item. */
export function renderTree(api: RaySleuthApi): RenderedItem[] {
  const out: RenderedItem[] = [];
  const walk = (element: ClusterTreeNode | undefined, depth: number) => {
    for (const child of api.workerTree.getChildren(element)) {
      const item = api.workerTree.getTreeItem(child);
      out.push({
        kind: child.kind,
        label: typeof item.label === "string" ? item.label : (item.label?.label ?? ""),
        description: typeof item.description === "string" ? item.description : "",
        contextValue: item.contextValue ?? "",
        icon: item.iconPath instanceof vscode.ThemeIcon ? item.iconPath.id : "",
        tooltip: typeof item.tooltip === "string" ? item.tooltip : "",
        depth,
      });
      walk(child, depth + 1);
    }
  };
  walk(undefined, 0);
  return out;
}

/** A DAP message a debug adapter sent to VS Code, as a tracker sees it. */
export interface DapMessage {
  type: string;
  command?: string;
  event?: string;
  body?: Record<string, unknown>;
}

/** Records what every "raysleuth" session's adapter sends, by session id, into `messages`. */
export function trackDapMessages(messages: Map<string, DapMessage[]>): vscode.Disposable {
  return vscode.debug.registerDebugAdapterTrackerFactory(DEBUG_TYPE, {
    createDebugAdapterTracker(session) {
      const list: DapMessage[] = [];
      messages.set(session.id, list);
      return { onDidSendMessage: (m: unknown) => list.push(m as DapMessage) };
    },
  });
}
