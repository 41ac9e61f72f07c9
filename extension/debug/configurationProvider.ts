// Resolves "raysleuth" attach configurations: asks for a worker when none is
// named, fills in the broker's DAP address (the adapter adds a single-use attach
// ticket when it sends the attach: the token is never in a configuration), adds
// raySleuth.pathMappings, and refuses a second session per worker.
import * as vscode from "vscode";
import { Commands, DEBUG_TYPE, Settings } from "../constants";
import { log } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import type { BrokerAccess } from "../broker/brokerConnection";
import { dapAddressFor } from "../broker/remoteAddress";
import { ClusterState } from "../cluster/clusterState";
import { hasTarget, mergePathMappings, parseDapAddress, sessionKey, sessionName, SleuthAttachConfig, targetWorker } from "./attachConfig";
import { WorkerSessionService } from "./workerSessions";

export class SleuthDebugConfigurationProvider implements vscode.DebugConfigurationProvider {
  constructor(
    private readonly broker: BrokerAccess,
    private readonly state: ClusterState,
    private readonly sessions: WorkerSessionService,
  ) {}

  /** F5 with no launch.json, and the first pass over every config: fill defaults, ask for a worker. */
  async resolveDebugConfiguration(_folder: vscode.WorkspaceFolder | undefined, debugConfiguration: vscode.DebugConfiguration): Promise<vscode.DebugConfiguration | undefined> {
    const config = debugConfiguration as SleuthAttachConfig;
    if (!config.type && !config.request && !config.name) {
      Object.assign(config, { type: DEBUG_TYPE, request: "attach", name: "Ray Sleuth: Attach to worker" });
    }
    config.type ??= DEBUG_TYPE;
    config.request ??= "attach";
    if (config.request !== "attach") {
      void vsapi.showErrorMessage(`Ray Sleuth sessions attach to running workers: set "request": "attach" in "${config.name ?? "the configuration"}".`);
      return undefined;
    }
    if (config.cluster) {
      return config as vscode.DebugConfiguration;
    }
    if (!hasTarget(config)) {
      const id = await vsapi.executeCommand<string | undefined>(Commands.pickWorker);
      if (!id) {
        return undefined; // cancelled
      }
      config.worker = id;
    }
    return config as vscode.DebugConfiguration;
  }

  /** After ${...} substitution: DAP address, path mappings, the one-session-per-worker rule. */
  async resolveDebugConfigurationWithSubstitutedVariables(
    folder: vscode.WorkspaceFolder | undefined,
    debugConfiguration: vscode.DebugConfiguration,
  ): Promise<vscode.DebugConfiguration | undefined> {
    const config = debugConfiguration as SleuthAttachConfig;
    if (config.cluster) {
      return config as vscode.DebugConfiguration;
    }
    const rank: unknown = config.rank;
    if (typeof rank === "string" && /^\d+$/.test(rank)) {
      config.rank = Number(rank); // "${input:rank}" gives text
    }
    const client = await this.broker.ensureClient();
    if (!client) {
      return undefined; // the connection has told the user why
    }
    delete config.token; // the adapter sends a ticket instead (brokerDapAdapter.ts)
    try {
      const status = await client.getStatus();
      const dap = dapAddressFor(client.url, status);
      parseDapAddress(dap);
      config.__raySleuthDap = dap;
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: cannot find the broker's debug port: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
    const mappings = mergePathMappings(config.pathMappings, vsapi.getSetting<unknown>(Settings.pathMappings, []), folder?.uri.fsPath);
    if (mappings.length) {
      config.pathMappings = mappings;
    } else if (folder && typeof config.localRoot !== "string") {
      config.localRoot = folder.uri.fsPath; // the broker maps a matching working_dir copy itself
    }
    const worker = targetWorker(config, this.state.workers);
    if (worker) {
      config.__raySleuthWorker = worker.id;
      if (!config.name || config.name === "Ray Sleuth: Attach to worker") {
        config.name = sessionName(worker);
      }
    }
    const key = sessionKey(config);
    const existing = key ? this.sessions.sessionFor(key) : undefined;
    if (existing) {
      this.sessions.focus(existing);
      return undefined;
    }
    log.info(`Attaching "${config.name}" through the broker's DAP port ${config.__raySleuthDap}`);
    return config as vscode.DebugConfiguration;
  }
}
