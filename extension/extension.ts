// Entry point: builds the extension's objects, wires them together and pushes
// them to the context. No logic here. activate() must never wait on the broker.
import * as vscode from "vscode";
import { Commands, DEBUG_TYPE, WALKTHROUGH_ID, WORKERS_VIEW_ID } from "./constants";
import { createLog, log, swallow } from "./common/log";
import { registerCommand, createTreeView, withProgress, showWarningMessage } from "./common/vscodeapi";
import { BrokerClient } from "./broker/brokerClient";
import { BrokerConnectionService } from "./broker/brokerConnection";
import { ClusterState } from "./cluster/clusterState";
import { ClusterStatusBar } from "./cluster/statusBar";
import { ClusterTreeNode, WorkerTreeProvider } from "./cluster/workerTreeProvider";
import { pickWorker } from "./cluster/workerPicker";
import { SleuthDebugAdapterFactory } from "./debug/adapterFactory";
import { AutoAttachService } from "./debug/autoAttach";
import { SleuthDebugConfigurationProvider } from "./debug/configurationProvider";
import { AttachTarget, WorkerSessionService } from "./debug/workerSessions";
import { BreakpointDecorations } from "./breakpoints/breakpointDecorations";
import { BreakpointMirrorService, editorOwner } from "./breakpoints/breakpointMirror";
import { ClusterBreakpointStore } from "./breakpoints/clusterBreakpointStore";
import { ClusterControlService } from "./breakpoints/clusterControl";
import { LogpointService } from "./breakpoints/logpoints";
import { RankBreakpointEditor } from "./breakpoints/rankBreakpoints";
import { EvaluateService } from "./views/evaluatePanel";
import { SnapshotService } from "./views/snapshotPanel";
import { CrashesService } from "./views/crashesView";
import { StacksService } from "./views/stacksView";
import { DoctorService } from "./views/doctorView";
import { RemoteConnectArgs, RemoteConnectService } from "./broker/remoteConnect";
import { WorkerLogsService } from "./views/workerLogsView";
import { AllStopService } from "./cluster/allStop";
import { CompareService } from "./views/comparePanel";
import { InspectService } from "./views/inspectPanel";
import { GpuService } from "./views/gpuPanel";
import { TimelineService } from "./views/timelinePanel";
import { SleuthLanguageClient } from "./lsp/languageClient";

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
  clusterBreakpoints: ClusterBreakpointStore;
  mirror: BreakpointMirrorService;
  decorations: BreakpointDecorations;
  rankBreakpoints: RankBreakpointEditor;
  autoAttach: AutoAttachService;
  control: ClusterControlService;
  evaluate: EvaluateService;
  snapshots: SnapshotService;
  logpoints: LogpointService;
  crashes: CrashesService;
  stacks: StacksService;
  workerLogs: WorkerLogsService;
  allStop: AllStopService;
  remote: RemoteConnectService;
  doctor: DoctorService;
  compare: CompareService;
  inspect: InspectService;
  gpu: GpuService;
  timeline: TimelineService;
  languageServer: SleuthLanguageClient;
  /** Resolves when the connect started by activation has finished. */
  initialConnect: Promise<boolean>;
}

/** Kept for deactivate(), which waits for the language server's shutdown (as vscode-languageclient asks). */
let activeLanguageServer: SleuthLanguageClient | undefined;

export function activate(context: vscode.ExtensionContext): RaySleuthApi {
  const channel = createLog();
  // Services first (client → connection → state → sessions → breakpoints), then the views on them.
  const connection = new BrokerConnectionService();
  const state = new ClusterState(connection);
  const sessions = new WorkerSessionService(state, connection);
  const ensureConnected = async () => (await connection.ensureClient()) !== undefined;
  const configurationProvider = new SleuthDebugConfigurationProvider(connection, state, sessions);
  const owner = editorOwner(context.workspaceState);
  const clusterBreakpoints = new ClusterBreakpointStore(connection);
  const mirror = new BreakpointMirrorService(connection, clusterBreakpoints, owner, context.workspaceState);
  const rankBreakpoints = new RankBreakpointEditor(state);
  const autoAttach = new AutoAttachService(state, sessions);
  const control = new ClusterControlService(connection, state);
  const logpoints = new LogpointService(connection, sessions);
  const workerTree = new WorkerTreeProvider(state);
  const treeView = createTreeView<ClusterTreeNode>(WORKERS_VIEW_ID, { treeDataProvider: workerTree, showCollapseAll: true });
  const statusBar = new ClusterStatusBar(state);
  const decorations = new BreakpointDecorations(clusterBreakpoints, owner);
  const evaluate = new EvaluateService(connection);
  const snapshots = new SnapshotService(connection, state);
  const crashes = new CrashesService(connection);
  const stacks = new StacksService(connection, state, (request) => snapshots.capture(request));
  const workerLogs = new WorkerLogsService(connection, state);
  const allStop = new AllStopService(connection);
  const remote = new RemoteConnectService(connection);
  const doctor = new DoctorService(connection);
  const compare = new CompareService(state, (request, title) => snapshots.capture(request, title));
  const inspect = new InspectService(connection);
  const gpu = new GpuService(connection, state, context.extensionUri);
  const timeline = new TimelineService(connection, context.extensionUri);
  const languageServer = new SleuthLanguageClient(channel, {
    revealWorkers: (ids) => workerTree.reveal(treeView, ids),
    adoptClusterBreakpoint: (file, line, from) => mirror.adopt(file, line, from),
  });
  activeLanguageServer = languageServer;

  context.subscriptions.push(
    channel,
    connection,
    state,
    sessions,
    clusterBreakpoints,
    mirror,
    autoAttach,
    logpoints,
    workerTree,
    treeView,
    statusBar,
    decorations,
    evaluate,
    snapshots,
    crashes,
    stacks,
    workerLogs,
    allStop,
    doctor,
    languageServer,
    compare,
    inspect,
    gpu,
    timeline,
    vscode.debug.registerDebugConfigurationProvider(DEBUG_TYPE, configurationProvider),
    vscode.debug.registerDebugAdapterDescriptorFactory(DEBUG_TYPE, new SleuthDebugAdapterFactory(() => sessions.newClusterAdapter())),
    registerCommand(Commands.pickWorker, () => pickWorker(state, ensureConnected)),
    registerCommand(Commands.attachWorker, (target) => sessions.attachWorker(target as AttachTarget)),
    registerCommand(Commands.attachAllPaused, () => sessions.attachAllPaused()),
    registerCommand(Commands.connect, () => withProgress("Ray Sleuth: connecting to the broker…", () => connection.connect({ interactive: true }))),
    registerCommand(Commands.refresh, () => connection.refresh()),
    registerCommand(Commands.startLocalBroker, () => connection.startLocalBroker()),
    registerCommand(Commands.showLog, () => log.show()),
    registerCommand(Commands.setBreakpointRanks, () => rankBreakpoints.command()),
    registerCommand(Commands.continueAll, () => control.continueAll()),
    registerCommand(Commands.pauseRank, (ranks) => control.pauseRanks(Array.isArray(ranks) ? (ranks as number[]) : undefined)),
    registerCommand(Commands.stepGroup, () => sessions.stepChildren("next").catch((e: unknown) => showWarningMessage(`Ray Sleuth: ${e instanceof Error ? e.message : String(e)}`))),
    registerCommand(Commands.evaluateAll, () => evaluate.command()),
    registerCommand(Commands.captureHere, () => snapshots.command()),
    registerCommand(Commands.inspectCrash, (target) => crashes.inspect(target)),
    registerCommand(Commands.refreshCrashes, () => crashes.refresh()),
    registerCommand(Commands.showStacks, () => stacks.show()),
    registerCommand(Commands.refreshStacks, () => stacks.refresh()),
    registerCommand(Commands.watchHangs, () => stacks.toggleWatch()),
    registerCommand(Commands.stopWatchingHangs, () => stacks.toggleWatch()),
    registerCommand(Commands.copyStacks, (target) => stacks.copyText(target)),
    registerCommand(Commands.attachStackRank, (target) => stacks.attachRank(target)),
    registerCommand(Commands.captureStackHere, (target) => stacks.captureHere(target)),
    registerCommand(Commands.openStackFrame, (target) => stacks.openFrame(target)),
    registerCommand(Commands.showWorkerOutput, (target) => workerLogs.show(target, "out")),
    registerCommand(Commands.showWorkerErrors, (target) => workerLogs.show(target, "err")),
    registerCommand(Commands.toggleAllStop, () => allStop.toggle()),
    registerCommand(Commands.connectRemote, (args) => remote.command(args as RemoteConnectArgs | undefined)),
    registerCommand(Commands.runDoctor, () => doctor.run()),
    registerCommand(Commands.revealWorkers, (target) => languageServer.revealWorkers(target)),
    registerCommand(Commands.restartLanguageServer, () => languageServer.restart()),
    registerCommand(Commands.compareAcrossRanks, (args) => compare.command(args)),
    registerCommand(Commands.showInspectTable, (args) => inspect.command(args)),
    registerCommand(Commands.showGpuMemory, (target) => gpu.show(target)),
    registerCommand(Commands.showTimeline, () => timeline.show()),
    registerCommand(Commands.exportPerfetto, (target) => timeline.exportPerfetto(target)),
    registerCommand(Commands.openWalkthrough, () => vscode.commands.executeCommand("workbench.action.openWalkthrough", WALKTHROUGH_ID, false)),
    treeView.onDidChangeVisibility((e) => {
      if (e.visible && state.status === "disconnected") {
        connection.connect({ interactive: false }).catch((err: unknown) => swallow("Connecting when the Cluster view opened failed", err));
      }
    }),
  );

  log.info(`Ray Sleuth ${String(context.extension.packageJSON.version)} activated`);
  const initialConnect = connection.connect({ interactive: false }).catch((err: unknown) => {
    swallow("Connecting at activation failed", err);
    return false;
  });
  void languageServer.start(); // never rejects; a server that cannot run is told once

  return {
    state,
    workerTree,
    treeView,
    statusBar,
    connection,
    sessions,
    configurationProvider,
    clusterBreakpoints,
    mirror,
    decorations,
    rankBreakpoints,
    autoAttach,
    control,
    evaluate,
    snapshots,
    logpoints,
    crashes,
    stacks,
    workerLogs,
    allStop,
    remote,
    doctor,
    languageServer,
    compare,
    inspect,
    gpu,
    timeline,
    get brokerClient() {
      return connection.client;
    },
    initialConnect,
  };
}

export function deactivate(): Thenable<void> | undefined {
  // Everything else is disposed through context.subscriptions (the local broker too).
  return activeLanguageServer?.stop();
}
