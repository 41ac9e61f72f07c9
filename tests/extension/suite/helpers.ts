// Shared by the extension-host tests: the activated extension's API, the
// broker the test run points it at, and waiting on conditions (never sleeps).
import { ChildProcess, spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import type { ClusterTreeNode } from "../../../extension/cluster/workerTreeProvider";
import { DEBUG_TYPE, EXTENSION_ID } from "../../../extension/constants";
import { BrokerReadyInfo } from "../../../extension/broker/types";
import { BrokerClient } from "../../../extension/broker/brokerClient";

export async function activateExtension(): Promise<RaySleuthApi> {
  const ext = vscode.extensions.getExtension<RaySleuthApi>(EXTENSION_ID);
  if (!ext) {
    throw new Error(`Extension ${EXTENSION_ID} is not loaded (is extensionDevelopmentPath right?)`);
  }
  const api = await ext.activate();
  await api.initialConnect;
  return api;
}

/** The activated extension once it is connected to the demo's broker. */
export async function connectedExtension(): Promise<RaySleuthApi> {
  const api = await activateExtension();
  await waitFor("the connection", () => api.state.status === "connected", 30_000);
  return api;
}

/** The checkout the extension runs from (its fixtures, its .venv). */
export function extensionRoot(): string {
  const root = vscode.extensions.getExtension(EXTENSION_ID)?.extensionPath;
  if (!root) {
    throw new Error(`Extension ${EXTENSION_ID} is not loaded`);
  }
  return root;
}

/** A client of the demo's broker of the test's own: what the cluster really has, whatever the extension shows. */
export function demoClient(): BrokerClient {
  const b = demoBroker();
  return new BrokerClient({ url: b.url, token: b.token });
}

/** Resolves when the session has ended. */
export function whenEnded(session: vscode.DebugSession): Promise<void> {
  return new Promise((resolve) => {
    const sub = vscode.debug.onDidTerminateDebugSession((s) => {
      if (s.id === session.id) {
        sub.dispose();
        resolve();
      }
    });
  });
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

/** A Python fixture (tests/fixtures/…) run against the demo's Ray cluster. */
export interface Fixture {
  readonly child: ChildProcess;
  /** Everything it printed so far, stdout and stderr. */
  out(): string;
  readonly exited: Promise<number | null>;
  /** The first match of `re` in its output; fails with the output when it exits first or after timeoutMs. */
  match(what: string, re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Ends its input, waits up to graceMs for it to exit, then sends SIGTERM. */
  stop(graceMs?: number): Promise<void>;
}

/** Runs tests/fixtures/`script` with the checkout's .venv against the demo's cluster, Ray kept on loopback. */
export function startFixture(script: string, args: string[] = []): Fixture {
  const root = extensionRoot();
  const rayAddress = demoBroker().rayAddress;
  if (!rayAddress) {
    throw new Error(`startFixture(${script}): broker.json names no ray_address`);
  }
  // The absolute path: the workers' code objects then name the same file the editor has open.
  const child = spawn(path.join(root, ".venv", "bin", "python"), [path.join(root, "tests", "fixtures", script), ...args], {
    cwd: root,
    env: { ...process.env, RAY_ADDRESS: rayAddress, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER: "0", PYTHONUNBUFFERED: "1" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr?.setEncoding("utf8").on("data", (c: string) => (out += c));
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  return {
    child,
    exited,
    out: () => out,
    async match(what, re, timeoutMs = 60_000) {
      const m = await waitFor(what, () => re.exec(out) ?? (child.exitCode !== null && "exited"), timeoutMs);
      if (!Array.isArray(m)) {
        throw new Error(`${script} exited (${child.exitCode}) before ${what}: ${out.slice(-3000)}`);
      }
      return m;
    },
    async stop(graceMs = 30_000) {
      child.stdin?.end();
      if (child.exitCode !== null) {
        return;
      }
      const late = await Promise.race([exited.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), graceMs).unref())]);
      if (late) {
        child.kill("SIGTERM");
      }
    },
  };
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

/** An enabled editor breakpoint at `index` (0-based line) of `file`. */
export function sourceBreakpoint(file: string, index: number, condition?: string, logMessage?: string): vscode.SourceBreakpoint {
  return new vscode.SourceBreakpoint(new vscode.Location(vscode.Uri.file(file), new vscode.Position(index, 0)), true, condition, undefined, logMessage);
}
