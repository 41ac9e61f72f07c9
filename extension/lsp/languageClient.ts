// Owns the language client of `raysleuth lsp` (issue 15): starts it with the chosen interpreter
// and the broker settings, restarts it when they change, and carries the server's own messages —
// the broker status to the status bar, a quick fix's breakpoint to the editor, the editor's
// breakpoints to the server. Its log is the extension's channel; a server that cannot run is
// said once, with what to do, and never takes the extension down.
import * as path from "path";
import * as vscode from "vscode";
import {
  CloseAction,
  CloseHandlerResult,
  ErrorAction,
  ErrorHandlerResult,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
} from "vscode-languageclient/node";
import { LANGUAGE_CLIENT_ID, LANGUAGE_CLIENT_NAME, Settings } from "../constants";
import { log, swallow } from "../common/log";
import { onDidChangePythonInterpreter, PythonChoice, pythonCandidates, safeSpawn } from "../common/python";
import * as vsapi from "../common/vscodeapi";
import { firstRunnable } from "./interpreterProbe";
import { ServerLogChannel } from "./serverLog";
import {
  BREAKPOINT_ADDED,
  BROKER_STATUS,
  BreakpointAddedParams,
  BrokerStatusParams,
  EDITOR_BREAKPOINTS,
  LSP_OWNER,
  brokerStatusText,
  editorBreakpoints,
  initializationOptions,
  parseBreakpointAdded,
  parseBrokerStatus,
  parseRevealArgs,
} from "./protocol";

/** Settings whose change restarts the server (the broker ones reach it as initializationOptions). */
const RESTART_ON = [Settings.brokerAddress, Settings.tokenFile, Settings.stateDir, Settings.pythonPath, Settings.languageServerEnabled];
/** A burst of settings changes (Connect to Remote Broker writes two) is one restart. */
const RESTART_DEBOUNCE_MS = 200;
/** The server is restarted after an unexpected exit at most this many times per window below. */
const MAX_CRASHES = 3;
const CRASH_WINDOW_MS = 3 * 60_000;
const NO_BROKER_SHOWN_MS = 15_000;
const SHOW_LOG = "Show Log";
const OPEN_SETTINGS = "Open Settings";

/** What the client needs from the rest of the extension (wired in extension.ts). */
export interface LanguageClientHooks {
  /** Shows these workers in the Cluster view; resolves to how many it found there. */
  revealWorkers(ids: readonly string[]): Thenable<number>;
  /** The editor now has the breakpoint `owner` set in the cluster at this line: take it over (BreakpointMirrorService.adopt). */
  adoptClusterBreakpoint(fsPath: string, line: number, owner: string): Promise<boolean>;
  /** The interpreter the local broker runs on (`python` in broker.json), if one is known. */
  brokerPython(): string | undefined;
}

export type LanguageServerState = "off" | "starting" | "running" | "stopped" | "failed";

export class SleuthLanguageClient implements vscode.Disposable {
  /** Shows a problem with the server; tests replace it to see what would be shown. */
  notifier: (message: string, ...actions: string[]) => Thenable<string | undefined> = (m, ...a) => vsapi.showWarningMessage(m, ...a);
  /** The last broker status the server sent. */
  brokerStatus: BrokerStatusParams | undefined;
  /** The interpreter the server runs on, and where it came from (undefined until one is found). */
  interpreter: PythonChoice | undefined;
  /** Every problem told so far: each text once per window. */
  readonly told: string[] = [];
  private client: LanguageClient | undefined;
  private _state: LanguageServerState = "off";
  private readonly stateChanged = new vscode.EventEmitter<LanguageServerState>();
  readonly onDidChangeState = this.stateChanged.event;
  private queue: Promise<void> = Promise.resolve();
  private restartTimer: NodeJS.Timeout | undefined;
  private crashes: number[] = [];
  /** Set while this window stops the server on purpose: its exit is no crash. */
  private stopping = false;
  private disposed = false;
  private noBrokerMessage: vscode.Disposable | undefined;
  private readonly disposables: vscode.Disposable[] = [this.stateChanged];
  private readonly channel: ServerLogChannel;

  constructor(
    /** The extension's log (common/log.ts): the server's stderr goes there, line by line. */
    logChannel: vscode.LogOutputChannel,
    private readonly hooks: LanguageClientHooks,
  ) {
    this.channel = new ServerLogChannel(logChannel);
    this.disposables.push(
      vsapi.onDidChangeSettings(RESTART_ON, () => this.scheduleRestart("settings changed")),
      vscode.debug.onDidChangeBreakpoints((e) => this.breakpointsChanged([...e.added, ...e.removed, ...e.changed])),
      vscode.workspace.onDidGrantWorkspaceTrust(() => this.scheduleRestart("the folder is trusted now")),
    );
    void onDidChangePythonInterpreter(() => {
      if (!vsapi.getSetting<string>(Settings.pythonPath, "").trim()) {
        this.scheduleRestart("the Python extension's interpreter changed");
      }
    }).then((d) => d && (this.disposed ? d.dispose() : this.disposables.push(d)));
  }

  toString(): string {
    return `LanguageClient[${this._state}]`;
  }

  get state(): LanguageServerState {
    return this._state;
  }

  /** Starts the server unless raySleuth.languageServer.enabled is off. Never rejects. */
  start(): Promise<void> {
    return this.enqueue(() => this.startClient());
  }

  /** Stops the server (if running) and starts it again with the settings of now. */
  restart(): Promise<void> {
    this.crashes = [];
    return this.enqueue(async () => {
      await this.stopClient();
      await this.startClient();
    });
  }

  /** Stops the server and keeps it stopped (deactivate). */
  stop(): Promise<void> {
    this.disposed = true;
    return this.enqueue(() => this.stopClient());
  }

  /** raySleuth.revealWorkers: a lens's "N workers" shows them in the Cluster view. */
  async revealWorkers(arg: unknown): Promise<number> {
    const target = parseRevealArgs(arg);
    const found = await this.hooks.revealWorkers(target?.workers ?? []);
    if (target && found < target.workers.length) {
      const gone = target.workers.length - found;
      vsapi.setStatusBarMessage(`Ray Sleuth: ${gone} of the workers of ${target.name || "this code"} left the Cluster view meanwhile`, 5_000);
    }
    return found;
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(step).catch((err: unknown) => swallow("Starting or stopping the language server failed", err));
    return this.queue;
  }

  private scheduleRestart(why: string): void {
    if (this.disposed) {
      return;
    }
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      log.info(`Language server: ${why}; restarting it`);
      void this.restart();
    }, RESTART_DEBOUNCE_MS);
  }

  private setState(state: LanguageServerState): void {
    if (state !== this._state) {
      this._state = state;
      this.stateChanged.fire(state);
    }
  }

  private async startClient(): Promise<void> {
    if (this.disposed || this.client) {
      return;
    }
    if (!vsapi.getSetting<boolean>(Settings.languageServerEnabled, true)) {
      log.info("Language server: off (raySleuth.languageServer.enabled)");
      this.setState("off");
      return;
    }
    this.setState("starting");
    const chosen = await this.findInterpreter();
    if (!chosen) {
      return;
    }
    const { python, source } = chosen;
    const client = new LanguageClient(LANGUAGE_CLIENT_ID, LANGUAGE_CLIENT_NAME, this.serverOptions(python), this.clientOptions());
    client.onNotification(BROKER_STATUS, (p: unknown) => this.brokerStatusChanged(p));
    client.onNotification(BREAKPOINT_ADDED, (p: unknown) => {
      this.breakpointAdded(p).catch((err: unknown) => swallow("Adding the quick fix's breakpoint failed", err));
    });
    this.client = client;
    log.info(`Language server: starting "${python} -m raysleuth lsp" (${source})`);
    this.interpreter = chosen;
    try {
      await client.start();
      this.setState("running");
    } catch (err) {
      swallow("Starting the language server failed", err);
      this.client = undefined;
      this.setState("failed");
      this.tellOnce(`Ray Sleuth: the language server did not start with "${python}" (${source}): ${err instanceof Error ? err.message : String(err)}. See the log.`, SHOW_LOG);
    }
  }

  /** The first interpreter that can run the server; none: the first one's problem is told once. */
  private async findInterpreter(): Promise<PythonChoice | undefined> {
    const { candidates, refused } = await pythonCandidates(this.brokerPythonSafe());
    const { chosen, problems } = await firstRunnable(candidates); // refused ones are never probed
    const none = `Ray Sleuth: no interpreter may run the language server here. ${refused.join(" ")} Set raySleuth.pythonPath in your user settings.`;
    problems.push(...(chosen || problems.length ? [] : [none])); // every candidate was refused
    problems.slice(chosen ? 0 : 1).forEach((p) => log.info(`Language server: ${p}`));
    if (!chosen) {
      log.warn(problems[0]);
      this.tellOnce(problems[0], OPEN_SETTINGS);
      this.setState("failed");
    }
    return chosen;
  }

  private brokerPythonSafe(): string | undefined {
    try {
      return this.hooks.brokerPython(); // throws for a broker.json that fileTrust refuses
    } catch (err) {
      return void swallow("Reading the broker's interpreter failed", err);
    }
  }

  /** A broker appeared: a server that found no interpreter tries again (the broker's may do). */
  brokerAvailable(): void {
    if (this._state === "failed" && !this.client && !this.disposed) {
      this.scheduleRestart("a broker is up (its interpreter may run the server)");
    }
  }

  private async stopClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (!client) {
      if (this._state !== "off") {
        this.setState("stopped");
      }
      return;
    }
    this.stopping = true;
    try {
      if (client.needsStop()) {
        await client.stop(3_000);
      }
    } catch (err) {
      swallow("Stopping the language server failed", err);
    } finally {
      this.stopping = false;
      this.setState("stopped");
    }
  }

  private serverOptions(python: string): ServerOptions {
    // No transport flag: the server speaks on stdin/stdout; its stderr is its log (this channel).
    const { cwd, env } = safeSpawn(); // Restricted Mode: not in the folder (`-m` imports from the cwd)
    return { command: python, args: ["-m", "raysleuth", "lsp"], options: { env: { ...process.env, PYTHONUNBUFFERED: "1", ...env }, ...(cwd ? { cwd } : {}) } };
  }

  private clientOptions(): LanguageClientOptions {
    return {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
      ],
      outputChannel: this.channel,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: initializationOptions((k) => vsapi.getSetting<string>(Settings[k], "")),
      initializationFailedHandler: (err) => {
        swallow("The language server failed to initialize", err);
        return false;
      },
      errorHandler: { error: (e) => this.onError(e), closed: () => this.onClosed() },
      middleware: {
        didOpen: async (doc, next) => {
          await next(doc);
          this.sendEditorBreakpoints(doc.uri, false);
        },
      },
    };
  }

  private onError(err: Error): ErrorHandlerResult {
    log.warn(`Language server connection: ${err.message}`);
    return { action: ErrorAction.Continue, handled: true };
  }

  private onClosed(): CloseHandlerResult {
    if (this.stopping || this.disposed) {
      return { action: CloseAction.DoNotRestart, handled: true };
    }
    const now = Date.now();
    this.crashes = [...this.crashes.filter((t) => now - t < CRASH_WINDOW_MS), now];
    if (this.crashes.length <= MAX_CRASHES) {
      log.warn(`The language server exited (${this.crashes.length} in the last 3 minutes); restarting it`);
      return { action: CloseAction.Restart, handled: true };
    }
    this.setState("failed");
    this.tellOnce(
      `Ray Sleuth: the language server exited ${this.crashes.length} times in 3 minutes and is not restarted. Its log is in the "Ray Sleuth" output; "Ray Sleuth: Restart Language Server" starts it again.`,
      SHOW_LOG,
    );
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  private tellOnce(message: string, ...actions: string[]): void {
    if (this.told.includes(message)) {
      return;
    }
    this.told.push(message);
    this.notifier(message, ...actions).then(
      (picked) => {
        if (picked === SHOW_LOG) {
          log.show();
        } else if (picked === OPEN_SETTINGS) {
          void vsapi.openSettings("raySleuth.pythonPath");
        }
      },
      (err: unknown) => swallow("Showing a language server problem failed", err),
    );
  }

  /** The live parts say once, in the status bar, that no broker is there (the server sends each change once). */
  private brokerStatusChanged(params: unknown): void {
    const s = parseBrokerStatus(params);
    if (!s) {
      log.warn(`Language server: unreadable ${BROKER_STATUS}: ${JSON.stringify(params)}`);
      return;
    }
    const before = this.brokerStatus;
    this.brokerStatus = s;
    log.info(`Language server: ${s.message}`);
    this.noBrokerMessage?.dispose();
    this.noBrokerMessage = undefined;
    if (!s.connected && before?.connected !== false) {
      this.noBrokerMessage = vsapi.setStatusBarMessage(brokerStatusText(s), NO_BROKER_SHOWN_MS);
    }
  }

  /** A quick fix's breakpoint: the editor gets it (the mirror spreads it when there is a broker). */
  private async breakpointAdded(params: unknown): Promise<void> {
    const p: BreakpointAddedParams | undefined = parseBreakpointAdded(params);
    if (!p) {
      log.warn(`Language server: unreadable ${BREAKPOINT_ADDED}: ${JSON.stringify(params)}`);
      return;
    }
    const uri = this.client ? this.client.protocol2CodeConverter.asUri(p.uri) : vscode.Uri.parse(p.uri);
    const line = p.line - 1;
    const there = vscode.debug.breakpoints.some(
      (bp) => bp instanceof vscode.SourceBreakpoint && bp.location.uri.toString() === uri.toString() && bp.location.range.start.line === line,
    );
    if (!there) {
      vscode.debug.addBreakpoints([new vscode.SourceBreakpoint(new vscode.Location(uri, new vscode.Position(line, 0)))]);
    }
    log.info(`Quick fix breakpoint at ${uri.fsPath}:${p.line}: ${p.message}`);
    vsapi.setStatusBarMessage(`$(debug-breakpoint) Ray Sleuth: ${p.message}`, 5_000);
    if (p.cluster && uri.scheme === "file") {
      // The server set it as owner "lsp"; the editor's own point now stands for it, so that removing the
      // red dot removes it from the cluster too. Without the mirror, the server's point stays.
      await this.hooks.adoptClusterBreakpoint(path.normalize(uri.fsPath), p.line, LSP_OWNER);
    }
  }

  private breakpointsChanged(bps: readonly vscode.Breakpoint[]): void {
    const uris = new Map<string, vscode.Uri>();
    for (const bp of bps) {
      if (bp instanceof vscode.SourceBreakpoint) {
        uris.set(bp.location.uri.toString(), bp.location.uri);
      }
    }
    for (const uri of uris.values()) {
      this.sendEditorBreakpoints(uri, true);
    }
  }

  /** Tells the server one open document's breakpoints (for its `[rank N]` checks); `always`: even none. */
  private sendEditorBreakpoints(uri: vscode.Uri, always: boolean): void {
    const client = this.client;
    const open = vscode.workspace.textDocuments.some((d) => d.uri.toString() === uri.toString() && d.languageId === "python");
    if (!client?.isRunning() || !open) {
      return;
    }
    const key = uri.toString();
    const mine = vscode.debug.breakpoints
      .filter((bp): bp is vscode.SourceBreakpoint => bp instanceof vscode.SourceBreakpoint && bp.location.uri.toString() === key)
      .map((bp) => ({ line: bp.location.range.start.line, condition: bp.condition, enabled: bp.enabled }));
    if (!always && mine.length === 0) {
      return;
    }
    const params = editorBreakpoints(client.code2ProtocolConverter.asUri(uri), mine);
    client.sendNotification(EDITOR_BREAKPOINTS, params).catch((err: unknown) => swallow("Sending the editor's breakpoints to the language server failed", err));
  }

  dispose(): void {
    clearTimeout(this.restartTimer);
    this.noBrokerMessage?.dispose();
    void this.stop();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
