// HTTP + server-sent-events client of the broker's API (workers, nodes, the
// cluster breakpoint set, evaluate, snapshots, continue/pause, /v1/stream),
// with the bearer token. node:http through a PeerCheckedAgent (every connection's peer is
// proven ours on loopback before a byte is sent: brokerHttp.ts), eventsource-parser for the
// stream and Node's EventEmitter; no vscode import, so it runs the same in the plain mocha
// tests and in the extension host. It never shows anything.
import { createHmac, randomBytes, timingSafeEqual } from "crypto";
import { EventEmitter } from "events";
import { BrokerError, fetchError, statusError } from "./brokerErrors";
import { bodyText, openResponse, PeerCheckedAgent, sendText } from "./brokerHttp";
import { readEventStream, stacksQueryString } from "./brokerWire";
import {
  BrokerSettings,
  BrokerStatus,
  ClusterBreakpoint,
  ContinueReply,
  EvaluateResult,
  FileBreakpoints,
  FileBreakpointsReply,
  NodeInfo,
  PauseReply,
  SnapshotRequest,
  SnapshotRow,
  SnapshotSummary,
  StacksQuery,
  StacksResult,
  StacksWatchRequest,
  StacksWatchStatus,
  StreamEvent,
  WorkerInfo,
  WorkerLogChunk,
  WorkerSelector,
} from "./types";

export { BrokerError, type BrokerErrorKind } from "./brokerErrors";
export { readEventStream, stacksQueryString } from "./brokerWire";

export type StreamState = "connecting" | "open" | "closed";

/** First delay before the stream reconnects, in ms. */
export const DEFAULT_MIN_BACKOFF_MS = 250;
/** Longest delay between reconnects, in ms: how long a restarted broker may wait to be seen. */
export const DEFAULT_MAX_BACKOFF_MS = 1000;

export interface BrokerClientOptions {
  /** Base URL, e.g. http://127.0.0.1:7311 */
  url: string;
  token: string;
  /** Per-request timeout in ms. */
  timeoutMs?: number;
  /** First and longest delay between stream reconnects, in ms. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

/** What a subscription returns: vscode.Disposable's shape, without importing vscode. */
export interface Subscription {
  dispose(): void;
}

/** The client's events and their arguments. */
interface ClientEvents {
  workers: [WorkerInfo[]];
  streamState: [StreamState];
  streamError: [BrokerError];
  streamEvent: [StreamEvent];
}

export class BrokerClient {
  readonly url: string;
  /** The bearer token: sent only on connections whose peer was proven ours (PeerCheckedAgent). */
  readonly token: string;
  private readonly agent: PeerCheckedAgent;
  private readonly timeoutMs: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;

  private readonly events = new EventEmitter<ClientEvents>();

  /** Fired with the full worker list on every `workers` stream event. */
  readonly onWorkers = (l: (workers: WorkerInfo[]) => void) => this.on("workers", l);
  readonly onStreamState = (l: (state: StreamState) => void) => this.on("streamState", l);
  /** Fired when the stream fails; a 401 stops the reconnects, anything else retries. */
  readonly onStreamError = (l: (err: BrokerError) => void) => this.on("streamError", l);
  /** Every stream event, parsed (for kinds this client has no typed event for). */
  readonly onStreamEvent = (l: (e: StreamEvent) => void) => this.on("streamEvent", l);

  /** Aborts the open stream request (stopStream, dispose). */
  private streamAbort: AbortController | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private backoffMs: number;
  private streaming = false;
  private disposed = false;
  private _streamState: StreamState = "closed";
  /** Settles once the broker proved it holds the token; cleared when a connection fails, so that a
   *  process that took a dead broker's port is asked again, and never gets the token. */
  private proven: Promise<void> | undefined;

  constructor(options: BrokerClientOptions) {
    this.url = options.url.replace(/\/+$/, "");
    this.token = options.token;
    this.agent = new PeerCheckedAgent(this.url);
    this.timeoutMs = options.timeoutMs ?? 10_000;
    // A broker that restarts is back within seconds: retry at most a second
    // apart (a refused connect costs nothing), not after up to 15 s (issue #13).
    this.minBackoffMs = options.minBackoffMs ?? DEFAULT_MIN_BACKOFF_MS;
    this.maxBackoffMs = options.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS;
    this.backoffMs = this.minBackoffMs;
  }

  get streamState(): StreamState {
    return this._streamState;
  }

  toString(): string {
    return `BrokerClient[${this.url}]`;
  }

  getWorkers(): Promise<WorkerInfo[]> {
    return this.requestJson<WorkerInfo[]>("GET", "/v1/workers");
  }

  getNodes(): Promise<NodeInfo[]> {
    return this.requestJson<NodeInfo[]>("GET", "/v1/nodes");
  }

  getStatus(): Promise<BrokerStatus> {
    return this.requestJson<BrokerStatus>("GET", "/v1/status");
  }

  /** Replaces one file's cluster breakpoints (an empty list clears them). */
  putBreakpoints(body: FileBreakpoints): Promise<FileBreakpointsReply> {
    return this.requestJson<FileBreakpointsReply>("PUT", "/v1/breakpoints", body);
  }

  getBreakpoints(): Promise<ClusterBreakpoint[]> {
    return this.requestJson<ClusterBreakpoint[]>("GET", "/v1/breakpoints");
  }

  /** Evaluates an expression in every paused worker (of these ranks). */
  evaluate(expression: string, ranks?: number[]): Promise<EvaluateResult[]> {
    return this.requestJson<EvaluateResult[]>("POST", "/v1/evaluate", { expression, ...(ranks ? { ranks } : {}) });
  }

  createSnapshot(request: SnapshotRequest): Promise<{ id: string }> {
    return this.requestJson<{ id: string }>("POST", "/v1/snapshots", request);
  }

  /** A snapshot point's rows; values of its expressions flagged across workers (rtol: the broker's default). */
  getSnapshot(id: string, rtol?: number): Promise<SnapshotRow[]> {
    return this.requestJson<SnapshotRow[]>("GET", `/v1/snapshots/${encodeURIComponent(id)}${rtol === undefined ? "" : `?rtol=${rtol}`}`);
  }

  /** Stops capturing at a snapshot point and forgets its rows. */
  deleteSnapshot(id: string): Promise<unknown> {
    return this.requestJson<unknown>("DELETE", `/v1/snapshots/${encodeURIComponent(id)}`);
  }

  getSnapshots(): Promise<SnapshotSummary[]> {
    return this.requestJson<SnapshotSummary[]>("GET", "/v1/snapshots");
  }

  /** Lets paused workers run on; an empty selector: every paused one. */
  continueWorkers(selector: WorkerSelector = {}): Promise<ContinueReply> {
    return this.requestJson<ContinueReply>("POST", "/v1/continue", selector);
  }

  /** Stops running workers where they are (they then show `paused`). */
  pauseWorkers(selector: WorkerSelector): Promise<PauseReply> {
    return this.requestJson<PauseReply>("POST", "/v1/pause", selector);
  }

  /** Every selected worker's stacks, grouped (the workers answer within `query.timeout` s). */
  getStacks(query: StacksQuery = {}): Promise<StacksResult> {
    return this.requestJson<StacksResult>("GET", `/v1/stacks${stacksQueryString(query)}`);
  }

  getStacksWatch(): Promise<StacksWatchStatus> {
    return this.requestJson<StacksWatchStatus>("GET", "/v1/stacks/watch");
  }

  /** Starts (or retunes) the broker's hang watch: a sample every `interval` s. */
  setStacksWatch(request: StacksWatchRequest = {}): Promise<StacksWatchStatus> {
    return this.requestJson<StacksWatchStatus>("PUT", "/v1/stacks/watch", request);
  }

  /** Stops the broker's hang watch. */
  deleteStacksWatch(): Promise<unknown> {
    return this.requestJson<unknown>("DELETE", "/v1/stacks/watch");
  }

  getSettings(): Promise<BrokerSettings> {
    return this.requestJson<BrokerSettings>("GET", "/v1/settings");
  }

  putSettings(settings: Partial<BrokerSettings>): Promise<BrokerSettings> {
    return this.requestJson<BrokerSettings>("PUT", "/v1/settings", settings);
  }

  /** A byte range of a worker's stdout ("out") or stderr ("err"); a negative offset: that many bytes before the end. */
  getWorkerLogs(workerId: string, stream: "out" | "err", offset: number, max?: number): Promise<WorkerLogChunk> {
    const q = new URLSearchParams({ stream, offset: String(offset), ...(max ? { max: String(max) } : {}) });
    return this.requestJson<WorkerLogChunk>("GET", `/v1/workers/${encodeURIComponent(workerId)}/logs?${q.toString()}`);
  }

  /** Asks the broker to prove it holds the token (GET /v1/hello: an HMAC of a fresh nonce; no token is
   *  sent); rejects with an "unauthorized" BrokerError when it cannot. Every token-bearing request waits for it. */
  verify(): Promise<void> {
    if (!this.proven) {
      const proving = this.prove();
      this.proven = proving;
      proving.catch(() => {
        if (this.proven === proving) {
          this.proven = undefined;
        }
      });
    }
    return this.proven;
  }

  private async prove(): Promise<void> {
    const nonce = randomBytes(16).toString("hex");
    let status: number;
    let text: string;
    try {
      ({ status, text } = await sendText(this.agent, this.url, `${this.url}/v1/hello?nonce=${nonce}`, {
        headers: { "User-Agent": this.authHeaders()["User-Agent"], Accept: "application/json" },
        timeoutMs: this.timeoutMs,
      }));
    } catch (err) {
      throw fetchError(this.url, this.timeoutMs, err, "GET /v1/hello");
    }
    let proof: unknown;
    try {
      proof = (JSON.parse(text) as { proof?: unknown }).proof;
    } catch {
      proof = undefined;
    }
    const want = Buffer.from(createHmac("sha256", this.token).update(`raysleuth-broker-proof:${nonce}`).digest("hex"));
    const given = Buffer.from(typeof proof === "string" ? proof : "");
    if (status !== 200 || given.length !== want.length || !timingSafeEqual(given, want)) {
      throw new BrokerError(
        "unauthorized",
        `The process at ${this.url} could not prove it holds your token, so the token was not sent to it: your token is wrong or ` +
          `stale (check raySleuth.tokenFile, RAYSLEUTH_TOKEN or the state dir's token file), or that is not your broker ` +
          `(one that died leaves its address free for anyone: start one with "raysleuth broker", or check raySleuth.brokerAddress).`,
        this.url,
        status,
      );
    }
  }

  /** One JSON request; rejects with a BrokerError that says what to do. */
  /** `timeoutMs`: this request's bound, for one the broker answers only once a long step is done. */
  async requestJson<T>(method: string, path: string, body?: unknown, timeoutMs = this.timeoutMs): Promise<T> {
    const what = `${method} ${path}`;
    let status: number;
    let text: string;
    try {
      await this.verify();
      ({ status, text } = await sendText(this.agent, this.url, this.url + path, {
        method,
        headers: {
          ...this.authHeaders(),
          Accept: "application/json",
          ...(body === undefined ? {} : { "Content-Type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        timeoutMs,
      }));
    } catch (err) {
      if (!(err instanceof BrokerError)) {
        this.proven = undefined; // the connection failed: whoever answers next proves itself again
      }
      throw fetchError(this.url, timeoutMs, err, what);
    }
    if (status < 200 || status >= 300) {
      throw statusError(this.url, status, text, what);
    }
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new BrokerError("protocol", `The broker at ${this.url} sent a reply to ${what} that is not JSON: ${text.slice(0, 200)}`, this.url, status);
    }
  }

  /** Opens GET /v1/stream and keeps it open, reconnecting with backoff, until stopStream(). */
  startStream(): void {
    if (this.disposed || this.streaming) {
      return;
    }
    this.streaming = true;
    void this.openStream();
  }

  stopStream(): void {
    this.streaming = false;
    if (this.reconnectTimer) {
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = undefined;
    }
    this.streamAbort?.abort();
    this.streamAbort = undefined;
    this.setStreamState("closed");
  }

  dispose(): void {
    this.stopStream();
    this.disposed = true;
    this.events.removeAllListeners();
    this.agent.destroy();
  }

  private on<K extends keyof ClientEvents>(name: K, listener: (...args: ClientEvents[K]) => void): Subscription {
    // Node's listener type is conditional on K, which TypeScript cannot resolve for a generic K.
    const l = listener as never;
    this.events.on(name, l);
    return { dispose: () => this.events.off(name, l) };
  }

  /** One connection of the stream: resolves when it ended (then a reconnect is scheduled, unless stopped). */
  private async openStream(): Promise<void> {
    this.setStreamState("connecting");
    const abort = new AbortController();
    this.streamAbort = abort;
    const what = "GET /v1/stream";
    let failure: BrokerError;
    try {
      await this.verify();
      const res = await openResponse(this.agent, this.url, this.url + "/v1/stream", {
        headers: { ...this.authHeaders(), Accept: "text/event-stream", "Cache-Control": "no-cache" },
        signal: abort.signal,
      });
      if (res.statusCode !== 200) {
        failure = statusError(this.url, res.statusCode ?? 0, await bodyText(res), what);
      } else {
        this.backoffMs = this.minBackoffMs;
        this.setStreamState("open");
        await readEventStream(res, (event, data) => this.dispatch(event, data));
        failure = new BrokerError("network", `The broker at ${this.url} closed the event stream; reconnecting.`, this.url);
      }
    } catch (err) {
      failure = fetchError(this.url, this.timeoutMs, err, what);
    }
    if (abort.signal.aborted || abort !== this.streamAbort) {
      return; // stopped on purpose, or a newer connection took over
    }
    this.streamAbort = undefined;
    this.proven = undefined; // the stream ended: the broker may be gone, its port taken by another
    this.events.emit("streamError", failure);
    if (failure.kind === "unauthorized" || !this.streaming) {
      // Retrying with the same token cannot help.
      this.streaming = false;
      this.setStreamState("closed");
      return;
    }
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    this.setStreamState("connecting");
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.maxBackoffMs);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.streaming && !this.disposed) {
        void this.openStream();
      }
    }, delay);
  }

  private dispatch(event: string, data: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      this.events.emit("streamError", new BrokerError("protocol", `The broker sent a "${event}" event whose data is not JSON: ${data.slice(0, 200)}`, this.url));
      return;
    }
    this.events.emit("streamEvent", { event, data: parsed });
    if (event === "workers" && Array.isArray(parsed)) {
      this.events.emit("workers", parsed as WorkerInfo[]);
    }
  }

  private setStreamState(state: StreamState): void {
    if (state !== this._streamState) {
      this._streamState = state;
      this.events.emit("streamState", state);
    }
  }

  private authHeaders(): Record<string, string> {
    // The broker's log names who changed the cluster set: this window, by its process id.
    return { Authorization: `Bearer ${this.token}`, "User-Agent": `raysleuth-vscode (pid ${process.pid})` };
  }
}
