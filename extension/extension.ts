// Entry point: builds the extension's objects, wires them together and pushes
// them to the context. No logic here. activate() must never wait on the broker.
import * as vscode from "vscode";
import { Commands, DEBUG_TYPE, WORKERS_VIEW_ID } from "./constants";
import { createLog, log, swallow } from "./common/log";
import { registerCommand, createTreeView } from "./common/vscodeapi";
import { BrokerClient } from "./broker/brokerClient";
import { BrokerConnectionService } from "./broker/brokerConnection";
import { ClusterState } from "./cluster/clusterState";
import { ClusterStatusBar } from "./cluster/statusBar";
import { ClusterTreeNode, WorkerTreeProvider } from "./cluster/workerTreeProvider";
import { SleuthDebugAdapterFactory } from "./debug/adapterFactory";
import { SleuthDebugConfigurationProvider } from "./debug/configurationProvider";
import { pickWorker } from "./debug/workerPicker";
import { AttachTarget, WorkerSessionService } from "./debug/workerSessions";

/** What activate() returns: used by the extension tests, and by nothing else. */
export interface RaySleuthApi {
  state: ClusterState;
  workerTree: WorkerTreeProvider;
  treeView: vscode.TreeView<ClusterTreeNode>;
  statusBar: ClusterStatusBar;
  connection: BrokerConnectionService;
  readonly brokerClient: BrokerClient | undefined;
  sessions: WorkerSessionService;
  configurationProvider: SleuthDebugConfigurationProvider;
  /** Resolves when the connect started by activation has finished. */
  initialConnect: Promise<boolean>;
}

export function activate(context: vscode.ExtensionContext): RaySleuthApi {
  const channel = createLog();
  const state = new ClusterState();
  const workerTree = new WorkerTreeProvider(state);
  const treeView = createTreeView<ClusterTreeNode>(WORKERS_VIEW_ID, { treeDataProvider: workerTree, showCollapseAll: true });
  const statusBar = new ClusterStatusBar(state);
  const connection = new BrokerConnectionService(state);
  const sessions = new WorkerSessionService(state);
  const ensureConnected = async () => connection.client !== undefined || (await connection.connect({ interactive: true }));
  const configurationProvider = new SleuthDebugConfigurationProvider(
    { client: async () => ((await ensureConnected()) ? connection.client : undefined) },
    state,
    sessions,
  );

  context.subscriptions.push(
    channel,
    state,
    workerTree,
    treeView,
    statusBar,
    connection,
    sessions,
    vscode.debug.registerDebugConfigurationProvider(DEBUG_TYPE, configurationProvider),
    vscode.debug.registerDebugAdapterDescriptorFactory(DEBUG_TYPE, new SleuthDebugAdapterFactory()),
    registerCommand(Commands.pickWorker, () => pickWorker(state, ensureConnected)),
    registerCommand(Commands.attachWorker, (target) => sessions.attachWorker(target as AttachTarget)),
    registerCommand(Commands.attachAllPaused, () => sessions.attachAllPaused()),
    registerCommand(Commands.connect, () => connection.connect({ interactive: true })),
    registerCommand(Commands.refresh, () => connection.refresh()),
    registerCommand(Commands.startLocalBroker, () => connection.startLocalBroker()),
    registerCommand(Commands.showLog, () => log.show()),
    treeView.onDidChangeVisibility((e) => {
      if (e.visible && state.status === "disconnected") {
        void connection.connect({ interactive: false });
      }
    }),
  );

  log.info(`Ray Sleuth ${String(context.extension.packageJSON.version)} activated`);
  const initialConnect = connection.connect({ interactive: false }).catch((err: unknown) => {
    swallow("Connecting at activation failed", err);
    return false;
  });

  return {
    state,
    workerTree,
    treeView,
    statusBar,
    connection,
    sessions,
    configurationProvider,
    get brokerClient() {
      return connection.client;
    },
    initialConnect,
  };
}

export function deactivate(): void {
  // Everything is disposed through context.subscriptions (the local broker too).
}
