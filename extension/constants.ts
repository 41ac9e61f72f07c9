// Every id the extension shares with package.json: commands, views, settings,
// context keys. Change a name here and in package.json together, never alone.

export const EXTENSION_ID = "raysleuth.ray-sleuth";
export const LOG_CHANNEL_NAME = "Ray Sleuth";
/** Where logpoint lines of the workers go (the user's program output, not the extension's log). */
export const LOGPOINT_CHANNEL_NAME = "Ray Sleuth Logpoints";
/** The language client's id (its trace setting would be `raySleuth.languageServer.trace.server`) and name. */
export const LANGUAGE_CLIENT_ID = "raySleuth.languageServer";
export const LANGUAGE_CLIENT_NAME = "Ray Sleuth Language Server";

export const VIEW_CONTAINER_ID = "raySleuth";
export const WORKERS_VIEW_ID = "raySleuth.workers";
export const CRASHES_VIEW_ID = "raySleuth.crashes";
export const STACKS_VIEW_ID = "raySleuth.stacks";
export const CASES_VIEW_ID = "raySleuth.cases";
export const PARALLEL_STACKS_VIEW_ID = "raySleuth.parallelStacks";
export const COLLECTIVES_VIEW_ID = "raySleuth.collectives";

export const Commands = {
  connect: "raySleuth.connect",
  refresh: "raySleuth.refresh",
  startLocalBroker: "raySleuth.startLocalBroker",
  showLog: "raySleuth.showLog",
  pickWorker: "raySleuth.pickWorker",
  attachWorker: "raySleuth.attachWorker",
  attachAllPaused: "raySleuth.attachAllPaused",
  setBreakpointRanks: "raySleuth.setBreakpointRanks",
  continueAll: "raySleuth.continueAll",
  pauseRank: "raySleuth.pauseRank",
  stepGroup: "raySleuth.stepGroup",
  evaluateAll: "raySleuth.evaluateAll",
  captureHere: "raySleuth.captureHere",
  inspectCrash: "raySleuth.inspectCrash",
  openCase: "raySleuth.openCase",
  watchDivergence: "raySleuth.watchDivergence",
  compareAcrossPausedRanks: "raySleuth.compareAcrossPausedRanks",
  showParallelStacks: "raySleuth.showParallelStacks",
  makeRankGroup: "raySleuth.makeRankGroup",
  continueGroup: "raySleuth.continueGroup",
  pauseGroup: "raySleuth.pauseGroup",
  chooseRankGroup: "raySleuth.chooseRankGroup",
  rerunCrash: "raySleuth.rerunCrash",
  showCollectives: "raySleuth.showCollectives",
  refreshCases: "raySleuth.refreshCases",
  refreshCrashes: "raySleuth.refreshCrashes",
  showStacks: "raySleuth.showStacks",
  refreshStacks: "raySleuth.refreshStacks",
  watchHangs: "raySleuth.watchHangs",
  stopWatchingHangs: "raySleuth.stopWatchingHangs",
  copyStacks: "raySleuth.copyStacks",
  attachStackRank: "raySleuth.attachStackRank",
  captureStackHere: "raySleuth.captureStackHere",
  openStackFrame: "raySleuth.openStackFrame",
  showWorkerOutput: "raySleuth.showWorkerOutput",
  showWorkerErrors: "raySleuth.showWorkerErrors",
  toggleAllStop: "raySleuth.toggleAllStop",
  connectRemote: "raySleuth.connectRemote",
  runDoctor: "raySleuth.runDoctor",
  openWalkthrough: "raySleuth.openWalkthrough",
  compareAcrossRanks: "raySleuth.compareAcrossRanks",
  showInspectTable: "raySleuth.showInspectTable",
  showGpuMemory: "raySleuth.showGpuMemory",
  showTimeline: "raySleuth.showTimeline",
  exportPerfetto: "raySleuth.exportPerfetto",
  /** A code lens's "N workers": {name, kind, workers: [ids]} (lsp/protocol.ts). */
  revealWorkers: "raySleuth.revealWorkers",
  restartLanguageServer: "raySleuth.restartLanguageServer",
  /** Built in: VS Code adds `<viewId>.focus` for every view. */
  focusWorkers: `${WORKERS_VIEW_ID}.focus`,
  focusStacks: `${STACKS_VIEW_ID}.focus`,
} as const;

export const SETTINGS_SECTION = "raySleuth";
export const Settings = {
  brokerAddress: "brokerAddress",
  tokenFile: "tokenFile",
  stateDir: "stateDir",
  pythonPath: "pythonPath",
  pathMappings: "pathMappings",
  clusterBreakpoints: "clusterBreakpoints",
  plainBreakpoints: "plainBreakpoints",
  autoAttach: "autoAttach",
  allStop: "allStop",
  languageServerEnabled: "languageServer.enabled",
} as const;

/** The debug type in package.json's contributes.debuggers. */
export const DEBUG_TYPE = "raysleuth";
/** Name of the one parent session that holds every worker session of a window. */
export const CLUSTER_SESSION_NAME = "Ray cluster";

export const ContextKeys = {
  connected: "raySleuth.connected",
  /** The broker's hang watch is on (the Stacks view's title shows the stop button). */
  watchingHangs: "raySleuth.watchingHangs",
  /** The broker's all-stop per job is on. */
  allStop: "raySleuth.allStop",
} as const;

/** Environment variable holding the broker token (as in the CLI). */
export const TOKEN_ENV = "RAYSLEUTH_TOKEN";
/** The broker writes this file into its state dir once it is ready. */
export const BROKER_FILE = "broker.json";
export const DEFAULT_STATE_DIR = "~/.raysleuth";
/** contributes.walkthroughs id, as "<publisher>.<name>#<id>" for workbench.action.openWalkthrough. */
export const WALKTHROUGH_ID = `${EXTENSION_ID}#raySleuth.gettingStarted`;
