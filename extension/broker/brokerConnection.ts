// Owns the link to one broker: finds it (brokerLocator), connects a
// BrokerClient, publishes the connection status, the worker and node lists
// and the stream's events, and tells the user, with actions, what went wrong.
// It knows no view and no cluster state: those listen. Never blocks activation.
import * as vscode from "vscode";
import { Commands, ContextKeys, Settings } from "../constants";
import { log, swallow } from "../common/log";
import { resolvePythonPath, safeSpawn } from "../common/python";
import * as vsapi from "../common/vscodeapi";
import { BrokerClient, BrokerError } from "./brokerClient";
import { BrokerLocation, BrokerNotFoundError, locateBroker, resolveStateDir } from "./brokerLocator";
import { readStateDirToken, UntrustedFileError } from "./fileTrust";
import { BrokerProcess } from "./brokerProcess";
import { NodeInfo, StreamEvent, WorkerInfo } from "./types";

export type ConnectionStatus = "disconnected" | "connecting" | "connected" | "reconnecting";

/** The connection's status and the broker it is about. */
export interface StatusChange {
  status: ConnectionStatus;
  url: string | undefined;
}

/** How services reach the broker: the connected client, connecting first (and telling the user on failure) when there is none. */
export interface BrokerAccess {
  ensureClient(): Promise<BrokerClient | undefined>;
}

const START_LOCAL = "Start Local Broker";
const OPEN_SETTINGS = "Open Settings";
const SHOW_LOG = "Show Log";

/** How errors reach the user; replaceable so tests can see what would be shown. */
export interface Notifier {
  error(message: string, ...actions: string[]): Thenable<string | undefined>;
  info(message: string, ...actions: string[]): Thenable<string | undefined>;
}

export const windowNotifier: Notifier = {
  error: (m, ...a) => vsapi.showErrorMessage(m, ...a),
  info: (m, ...a) => vsapi.showInformationMessage(m, ...a),
};

export type { StreamEvent };

export interface ConnectOptions {
  /** True when the user asked (a command): then "nothing found" is told too. */
  interactive: boolean;
}

export class BrokerConnectionService implements BrokerAccess, vscode.Disposable {
  notifier: Notifier = windowNotifier;
  /** The last error shown or logged, for tests and the log. */
  lastError: Error | undefined;

  private _client: BrokerClient | undefined;
  private generation = 0;
  private localBroker: BrokerProcess | undefined;
  private nodesRefresh: NodeJS.Timeout | undefined;
  private _status: ConnectionStatus = "disconnected";
  private _url: string | undefined;
  /** Node ids of the last node list, to notice a worker on a node not listed yet. */
  private knownNodes = new Set<string>();
  /** Clients whose stream met a peer that is not ours, and the user was told. */
  private readonly toldUntrusted = new WeakSet<BrokerClient>();
  private readonly connected = new vscode.EventEmitter<BrokerClient>();
  private readonly streamEvent = new vscode.EventEmitter<StreamEvent>();
  private readonly statusChanged = new vscode.EventEmitter<StatusChange>();
  private readonly workersChanged = new vscode.EventEmitter<WorkerInfo[]>();
  private readonly nodesChanged = new vscode.EventEmitter<NodeInfo[]>();
  private readonly disposables: vscode.Disposable[] = [this.connected, this.streamEvent, this.statusChanged, this.workersChanged, this.nodesChanged];

  /** Fired on every status change ("disconnected" drops what was known of the cluster). */
  readonly onDidChangeStatus = this.statusChanged.event;
  /** The broker's full worker list: on connect, on refresh and on every `workers` stream event. */
  readonly onDidReceiveWorkers = this.workersChanged.event;
  /** The broker's node list: on connect, on refresh, and when a worker names a node not listed yet. */
  readonly onDidReceiveNodes = this.nodesChanged.event;

  /**
   * Fired with the client once connected, and again when its event stream is
   * back after a break (the broker may have restarted and lost what it was told).
   */
  readonly onDidConnect = this.connected.event;
  /**
   * Which broker the connection is to: its URL and start time. A restarted broker (same URL) or
   * another one has a new value; views that show a broker's data mark it stale then. Set before
   * onDidConnect fires.
   */
  instance: string | undefined;
  /** Every event of the connected client's stream (`workers`, `breakpoints`, `log`, `snapshot`, ...). */
  readonly onStreamEvent = this.streamEvent.event;

  constructor() {
    this.disposables.push(
      vsapi.onDidChangeSettings([Settings.brokerAddress, Settings.tokenFile, Settings.stateDir], () => {
        log.info("Ray Sleuth settings changed; reconnecting");
        this.connect({ interactive: false }).catch((e: unknown) => swallow("Reconnecting after a settings change failed", e));
      }),
    );
  }

  get client(): BrokerClient | undefined {
    return this._client;
  }

  get status(): ConnectionStatus {
    return this._status;
  }

  /** The connected client, connecting first (interactive: failures are told) when there is none. */
  async ensureClient(): Promise<BrokerClient | undefined> {
    if (!this._client) {
      await this.connect({ interactive: true });
    }
    return this._client;
  }

  private setStatus(status: ConnectionStatus, url?: string): void {
    this._status = status;
    if (url !== undefined) {
      this._url = url;
    }
    this.statusChanged.fire({ status, url: this._url });
  }

  private publish(workers: WorkerInfo[] | undefined, nodes: NodeInfo[] | undefined): void {
    if (nodes) {
      this.knownNodes = new Set(nodes.map((n) => n.node_id));
      this.nodesChanged.fire(nodes);
    }
    if (workers) {
      this.workersChanged.fire(workers);
    }
  }

  toString(): string {
    return `BrokerConnection[${this._client?.url ?? "none"}]`;
  }

  /** Finds the broker from the settings / broker.json and connects. Resolves false on failure (already told). */
  async connect(options: ConnectOptions): Promise<boolean> {
    let location: BrokerLocation;
    try {
      location = this.locate();
    } catch (err) {
      this.closeClient();
      this.setStatus("disconnected");
      this.report(err, options);
      return false;
    }
    return this.connectTo(location, options);
  }

  private locate(): BrokerLocation {
    return locateBroker({
      brokerAddress: vsapi.getSetting<string>(Settings.brokerAddress, ""),
      tokenFile: vsapi.getSetting<string>(Settings.tokenFile, ""),
      stateDir: vsapi.getSetting<string>(Settings.stateDir, ""),
    });
  }

  /** Connects to a known address with a known token. */
  async connectTo(location: BrokerLocation, options: ConnectOptions): Promise<boolean> {
    const gen = ++this.generation;
    this.closeClient();
    log.info(`Connecting to the broker at ${location.url} (from ${location.source})`);
    this.setStatus("connecting", location.url);
    const client = new BrokerClient({ url: location.url, token: location.token });
    try {
      const [workers, nodes, status] = await Promise.all([client.getWorkers(), client.getNodes(), client.getStatus()]);
      if (gen !== this.generation) {
        client.dispose();
        return false;
      }
      this._client = client;
      this.instance = `${client.url}@${status.started ?? "?"}`;
      this.publish(workers, nodes);
      this.setStatus("connected", location.url);
      await vsapi.setContext(ContextKeys.connected, true);
      this.lastError = undefined;
      log.info(`Connected to the broker at ${location.url}: ${workers.length} workers on ${nodes.length} nodes`);
    } catch (err) {
      client.dispose();
      if (gen === this.generation) {
        this.setStatus("disconnected");
        await vsapi.setContext(ContextKeys.connected, false);
        this.report(err, options);
      }
      return false;
    }
    this.wireStream(client, gen);
    client.startStream();
    this.connected.fire(client);
    return true;
  }

  /** Fetches workers and nodes again; connects first when not connected. */
  async refresh(): Promise<void> {
    const client = this._client;
    if (!client) {
      await this.connect({ interactive: true });
      return;
    }
    try {
      const [workers, nodes] = await Promise.all([client.getWorkers(), client.getNodes()]);
      if (client === this._client) {
        this.publish(workers, nodes);
      }
    } catch (err) {
      this.report(err, { interactive: true });
    }
  }

  /** Runs `<python> -m raysleuth broker --state-dir <stateDir>` and connects to it. */
  async startLocalBroker(): Promise<boolean> {
    if (this.localBroker?.running) {
      log.info(`${this.localBroker} is already running; connecting`);
      return this.connect({ interactive: true });
    }
    let python: string, source: string;
    try {
      ({ python, source } = await resolvePythonPath()); // throws when none may run (Restricted Mode)
    } catch (err) {
      this.report(err, { interactive: true });
      return false;
    }
    const stateDir = resolveStateDir(vsapi.getSetting<string>(Settings.stateDir, ""));
    log.info(`Starting a local broker with ${python} (${source}), state dir ${stateDir}`);
    const proc = new BrokerProcess({ python, stateDir, ...safeSpawn(), onOutput: (line) => log.info(`[broker] ${line}`) });
    this.localBroker = proc;
    try {
      const ready = await vsapi.withProgress("Ray Sleuth: starting a local broker…", () => proc.start());
      log.info(`${proc} is ready at ${ready.http}`);
      return await this.connectTo(
        // The token of the state dir it was given (checked), not a path its ready line names.
        { url: ready.http, token: readStateDirToken(stateDir), source: `local broker (pid ${proc.pid})`, dap: ready.dap },
        { interactive: true },
      );
    } catch (err) {
      this.report(err, { interactive: true });
      return false;
    }
  }

  /** Tells the user about a failure, with actions that fix it. Never awaits the user. */
  report(err: unknown, options: ConnectOptions): void {
    const error = err instanceof Error ? err : new Error(String(err));
    this.lastError = error;
    log.error(error.message);
    if (err instanceof BrokerNotFoundError && err.nothingConfigured) {
      if (!options.interactive) {
        return; // at startup, with no broker anywhere, stay quiet: the view's welcome text offers the same
      }
      this.act(this.notifier.info(`${error.message} Start a local broker?`, START_LOCAL, OPEN_SETTINGS));
      return;
    }
    if (err instanceof BrokerError && err.kind === "refused") {
      this.act(this.notifier.error(error.message, START_LOCAL, OPEN_SETTINGS));
      return;
    }
    if (err instanceof UntrustedFileError || (err instanceof BrokerError && err.kind === "untrusted")) {
      this.act(this.notifier.error(error.message, OPEN_SETTINGS, SHOW_LOG));
      return;
    }
    if (err instanceof BrokerError && err.kind === "unauthorized") {
      this.act(this.notifier.error(error.message, OPEN_SETTINGS, SHOW_LOG));
      return;
    }
    this.act(this.notifier.error(error.message, SHOW_LOG));
  }

  private act(choice: Thenable<string | undefined>): void {
    choice.then(
      (picked) => {
        if (picked === START_LOCAL) {
          vsapi.executeCommand(Commands.startLocalBroker).then(undefined, (e: unknown) => swallow("Starting a local broker failed", e));
        } else if (picked === OPEN_SETTINGS) {
          void vsapi.openSettings("raySleuth"); // logs its own failure
        } else if (picked === SHOW_LOG) {
          log.show();
        }
      },
      (e: unknown) => swallow("Showing a notification failed", e),
    );
  }

  private wireStream(client: BrokerClient, gen: number): void {
    const live = () => gen === this.generation && client === this._client;
    client.onWorkers((workers) => {
      if (live()) {
        this.publish(workers, undefined);
        this.refreshNodesIfUnknown(workers);
      }
    });
    client.onStreamEvent((e) => {
      if (live()) {
        this.streamEvent.fire(e);
      }
    });
    client.onStreamState((s) => {
      if (!live()) {
        return;
      }
      if (s === "connecting" && this._status === "connected") {
        this.setStatus("reconnecting");
      } else if (s === "open" && this._status === "reconnecting") {
        log.info(`Event stream from ${client.url} is back`);
        this.setStatus("connected");
        this.refresh().catch((e: unknown) => swallow("Refreshing after the stream came back failed", e));
        client
          .getStatus()
          .then((status) => {
            this.instance = `${client.url}@${status.started ?? "?"}`;
          })
          .catch((e: unknown) => swallow("Reading the broker's status after the stream came back failed", e))
          .finally(() => live() && this.connected.fire(client));
      }
    });
    client.onStreamError((err) => {
      if (!live()) {
        return;
      }
      if (err.kind === "unauthorized") {
        this.closeClient();
        this.setStatus("disconnected");
        void vsapi.setContext(ContextKeys.connected, false); // logs its own failure
        this.report(err, { interactive: true });
      } else {
        this.lastError = err;
        log.warn(`Event stream: ${err.message}`);
        // "untrusted": another user's process holds the broker's port now (it got no byte); the
        // stream keeps asking (the broker may come back), and a restart elsewhere is followed.
        if (err.kind === "untrusted" && !this.toldUntrusted.has(client)) {
          this.toldUntrusted.add(client); // once per client: the stream asks again every second
          this.report(err, { interactive: true });
        }
        if (err.kind === "refused" || err.kind === "untrusted") {
          this.followRestartedBroker(client);
        }
      }
    });
  }

  /** The broker went away; if broker.json now names another one (a restart on a new port), switch to it. */
  private followRestartedBroker(client: BrokerClient): void {
    let next: BrokerLocation;
    try {
      next = this.locate();
    } catch (err) {
      // Nothing new yet: the stream keeps retrying the old address.
      log.debug(`No other broker to follow: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    if (next.url.replace(/\/+$/, "") !== client.url) {
      log.info(`broker.json now names ${next.url}; switching from ${client.url}`);
      this.connectTo(next, { interactive: false }).catch((e: unknown) => swallow(`Switching to the broker at ${next.url} failed`, e));
    }
  }

  /** A worker on a node that /v1/nodes did not list yet: fetch the nodes again (debounced). */
  private refreshNodesIfUnknown(workers: WorkerInfo[]): void {
    if (workers.every((w) => this.knownNodes.has(w.node_id ?? "")) || this.nodesRefresh) {
      return;
    }
    this.nodesRefresh = setTimeout(() => {
      this.nodesRefresh = undefined;
      const client = this._client;
      client?.getNodes().then(
        (nodes) => client === this._client && this.publish(undefined, nodes),
        (e: unknown) => swallow("Fetching nodes failed", e),
      );
    }, 250);
  }

  private closeClient(): void {
    this._client?.dispose();
    this._client = undefined;
  }

  dispose(): void {
    this.generation++;
    this.closeClient();
    if (this.nodesRefresh) {
      clearTimeout(this.nodesRefresh);
    }
    this.localBroker?.stop();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}

