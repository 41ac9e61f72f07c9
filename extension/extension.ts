// Entry point: builds the extension's objects, wires them together and pushes
// them to the context. No logic here. activate() must never wait on the broker.
import * as vscode from "vscode";
import { Commands, DEBUG_TYPE, WALKTHROUGH_ID } from "./constants";
import { createLog, log, swallow } from "./common/log";
import { registerCommand, withProgress, showWarningMessage } from "./common/vscodeapi";
import { pickWorker } from "./cluster/workerPicker";
import { SleuthDebugAdapterFactory } from "./debug/adapterFactory";
import { AttachTarget } from "./debug/workerSessions";
import { RemoteConnectArgs } from "./broker/remoteConnect";
import type { BrokerClient } from "./broker/brokerClient";
import type { SleuthLanguageClient } from "./lsp/languageClient";
import { buildServices, disposables, Services } from "./services";
import type { ParallelItem } from "./views/parallelTree";
import { rerunCrash } from "./views/rerunCrash";

/** What activate() returns: the services, for the extension tests, and nothing else. */
export type RaySleuthApi = Services & {
  readonly brokerClient: BrokerClient | undefined;
  /** Resolves when the connect started by activation has finished. */
  initialConnect: Promise<boolean>;
};

/** Kept for deactivate(), which waits for the language server's shutdown (as vscode-languageclient asks). */
let activeLanguageServer: SleuthLanguageClient | undefined;

export function activate(context: vscode.ExtensionContext): RaySleuthApi {
  const channel = createLog();
  const services = buildServices(context, channel);
  const { connection, state, sessions, configurationProvider, rankBreakpoints, control, evaluate, snapshots } = services;
  const { crashes, stacks, workerLogs, allStop, remote, doctor, compare, inspect, gpu, timeline, languageServer } = services;
  const ensureConnected = async () => (await connection.ensureClient()) !== undefined;
  activeLanguageServer = languageServer;

  context.subscriptions.push(
    channel,
    ...disposables(services),
    vscode.debug.registerDebugConfigurationProvider(DEBUG_TYPE, configurationProvider),
    vscode.debug.registerDebugAdapterDescriptorFactory(DEBUG_TYPE, new SleuthDebugAdapterFactory(() => sessions.newClusterAdapter(), connection)),
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
    registerCommand(Commands.compareAcrossPausedRanks, (arg) => evaluate.compareVariable(arg)),
    registerCommand(Commands.captureHere, () => snapshots.command()),
    registerCommand(Commands.inspectCrash, (target) => crashes.inspect(target)),
    registerCommand(Commands.openCase, (target) => services.cases.open(target)),
    registerCommand(Commands.showParallelStacks, () => services.parallelStacks.refresh()),
    registerCommand(Commands.makeRankGroup, (item) => services.parallelStacks.makeGroup(item as ParallelItem | undefined)),
    registerCommand(Commands.continueGroup, (item) => services.parallelStacks.actOnGroup("continue", item as ParallelItem | undefined)),
    registerCommand(Commands.pauseGroup, (item) => services.parallelStacks.actOnGroup("pause", item as ParallelItem | undefined)),
    registerCommand(Commands.showCollectives, () => services.collectives.refresh()),
    registerCommand(Commands.rerunCrash, (target) => rerunCrash(connection, (w) => sessions.attachWorker(w), target)),
    registerCommand(Commands.chooseRankGroup, (name) => services.groupChoice.choose(typeof name === "string" ? name : undefined)),
    registerCommand(Commands.refreshCases, () => services.cases.refresh()),
    registerCommand(Commands.watchDivergence, (args) => services.cases.watchSelection(args as Parameters<typeof services.cases.watchSelection>[0])),
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
    services.treeView.onDidChangeVisibility((e) => {
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
    ...services,
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
