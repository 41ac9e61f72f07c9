// Builds the extension's services and views once, in dependency order (client → connection →
// state → sessions → breakpoints → views), as one object: extension.ts registers the commands
// on it, disposes everything it holds and hands it to the tests.
import * as vscode from "vscode";
import { Settings, WORKERS_VIEW_ID } from "./constants";
import { createTreeView, getSetting } from "./common/vscodeapi";
import { readBrokerFile, resolveStateDir } from "./broker/brokerLocator";
import { BrokerConnectionService } from "./broker/brokerConnection";
import { ClusterState } from "./cluster/clusterState";
import { ClusterStatusBar } from "./cluster/statusBar";
import { ClusterTreeNode, WorkerTreeProvider } from "./cluster/workerTreeProvider";
import { AutoAttachService } from "./debug/autoAttach";
import { SleuthDebugConfigurationProvider } from "./debug/configurationProvider";
import { WorkerSessionService } from "./debug/workerSessions";
import { GroupChoice } from "./debug/groupChoice";
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
import { RemoteConnectService } from "./broker/remoteConnect";
import { WorkerLogsService } from "./views/workerLogsView";
import { AllStopService } from "./cluster/allStop";
import { CompareService } from "./views/comparePanel";
import { InspectService } from "./views/inspectPanel";
import { GpuService } from "./views/gpuPanel";
import { TimelineService } from "./views/timelinePanel";
import { WalkthroughProgress } from "./views/walkthroughProgress";
import { CasesService } from "./views/casesView";
import { ParallelStacksService } from "./views/parallelStacksView";
import { CollectivesService } from "./views/collectivesView";
import { SleuthLanguageClient } from "./lsp/languageClient";


export function buildServices(context: vscode.ExtensionContext, channel: vscode.LogOutputChannel) {
  const connection = new BrokerConnectionService();
  const state = new ClusterState(connection);
  const groupChoice = new GroupChoice(connection);
  const sessions = new WorkerSessionService(state, connection, groupChoice);
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
  const crashes = new CrashesService(connection, state);
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
    brokerPython: () => readBrokerFile(resolveStateDir(getSetting<string>(Settings.stateDir, "")))?.python ?? undefined,
  });
  state.onDidChange(() => state.status === "connected" && languageServer.brokerAvailable());
  const walkthrough = new WalkthroughProgress();
  const parallelStacks = new ParallelStacksService(connection, state);
  const collectives = new CollectivesService(connection);
  const cases = new CasesService(connection, {
    inspectCrash: async (id) => {
      await crashes.refresh();
      return crashes.inspect(id);
    },
    showStacks: (job) => stacks.show(job ? { job } : {}),
    showGpu: (id) => gpu.show({ kind: "worker", id }),
  });
  return {
    walkthrough, cases, parallelStacks, collectives, groupChoice, connection, state, sessions, configurationProvider, clusterBreakpoints, mirror, rankBreakpoints, autoAttach,
    control, logpoints, workerTree, treeView, statusBar, decorations, evaluate, snapshots, crashes, stacks,
    workerLogs, allStop, remote, doctor, compare, inspect, gpu, timeline, languageServer,
  };
}

export type Services = ReturnType<typeof buildServices>;

/** Everything of `services` that holds resources, for the extension context's subscriptions. */
export function disposables(services: Services): vscode.Disposable[] {
  return Object.values(services).filter((s): s is typeof s & vscode.Disposable => typeof (s as Partial<vscode.Disposable>).dispose === "function");
}
