// HTTP + server-sent-events client of the broker's API (workers, nodes, the
// cluster breakpoint set, evaluate, snapshots, continue/pause, /v1/stream),
// with the bearer token. Node's http module only;
// no vscode import, so it runs the same in tests and in the extension host.
import * as http from "http";
import * as https from "https";
import {
  BrokerErrorBody,
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
  WorkerInfo,
  WorkerSelector,
} from "./types";

export type BrokerErrorKind = "refused" | "unauthorized" | "http" | "timeout" | "network" | "protocol";

/** A failed broker call; `message` says what failed and what to do next. */
export class BrokerError extends Error {
  constructor(
    readonly kind: BrokerErrorKind,
    message: string,
    readonly url: string,
    readonly status?: number,
    readonly hint?: string,
    /** The broker's own `error` text, without the what-failed framing of `message`. */
    readonly brokerError?: string,
  ) {
    super(message);
    this.name = "BrokerError";
  }
}

export type StreamState = "connecting" | "open" | "closed";

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

type Listener<T> = (value: T) => void;

/** A tiny event source, so this file needs no vscode.EventEmitter. */
class Signal<T> {
  private readonly listeners = new Set<Listener<T>>();
  on(listener: Listener<T>): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }
  fire(value: T): void {
    for (const l of [...this.listeners]) {
      l(value);
    }
  }
  clear(): void {
    this.listeners.clear();
  }
}

export class BrokerClient {
  readonly url: string;
  /** The bearer token; debug sessions send it in their attach arguments. */
  readonly token: string;
  private readonly timeoutMs: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;

  private readonly workersSignal = new Signal<WorkerInfo[]>();
  private readonly streamStateSignal = new Signal<StreamState>();
  private readonly streamErrorSignal = new Signal<BrokerError>();
  private readonly streamEventSignal = new Signal<{ event: string; data: unknown }>();

  /** Fired with the full worker list on every `workers` stream event. */
  readonly onWorkers = (l: Listener<WorkerInfo[]>) => this.workersSignal.on(l);
  readonly onStreamState = (l: Listener<StreamState>) => this.streamStateSignal.on(l);
  /** Fired when the stream fails; a 401 stops the reconnects, anything else retries. */
  readonly onStreamError = (l: Listener<BrokerError>) => this.streamErrorSignal.on(l);
  /** Every stream event, parsed (for kinds this client has no typed signal for). */
  readonly onStreamEvent = (l: Listener<{ event: string; data: unknown }>) => this.streamEventSignal.on(l);

  private streamRequest: http.ClientRequest | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private backoffMs: number;
  private streaming = false;
  private disposed = false;
  private _streamState: StreamState = "closed";

  constructor(options: BrokerClientOptions) {
    this.url = options.url.replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.minBackoffMs = options.minBackoffMs ?? 500;
    this.maxBackoffMs = options.maxBackoffMs ?? 15_000;
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

  getSnapshot(id: string): Promise<SnapshotRow[]> {
    return this.requestJson<SnapshotRow[]>("GET", `/v1/snapshots/${encodeURIComponent(id)}`);
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

  /** One JSON request; rejects with a BrokerError that says what to do. */
  requestJson<T>(method: string, path: string, body?: unknown): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      let req: http.ClientRequest;
      try {
        req = this.transport().request(this.url + path, {
          method,
          headers: {
            ...this.authHeaders(),
            Accept: "application/json",
            ...(payload ? { "Content-Type": "application/json", "Content-Length": payload.length } : {}),
          },
          timeout: this.timeoutMs,
        });
      } catch (err) {
        reject(new BrokerError("protocol", `Invalid broker address ${this.url}: ${String(err)}. Check raySleuth.brokerAddress.`, this.url));
        return;
      }
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", (err) => reject(this.networkError(err, `${method} ${path}`)));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const status = res.statusCode ?? 0;
          if (status < 200 || status >= 300) {
            reject(this.statusError(status, text, `${method} ${path}`));
            return;
          }
          try {
            resolve(JSON.parse(text) as T);
          } catch {
            reject(new BrokerError("protocol", `The broker at ${this.url} sent a reply to ${method} ${path} that is not JSON: ${text.slice(0, 200)}`, this.url, status));
          }
        });
      });
      req.on("timeout", () => {
        req.destroy(new BrokerError("timeout", `The broker at ${this.url} did not answer ${method} ${path} within ${this.timeoutMs / 1000} s. Check that it is running ("raysleuth doctor").`, this.url));
      });
      req.on("error", (err) => reject(err instanceof BrokerError ? err : this.networkError(err, `${method} ${path}`)));
      req.end(payload);
    });
  }

  /** Opens GET /v1/stream and keeps it open, reconnecting with backoff, until stopStream(). */
  startStream(): void {
    if (this.disposed || this.streaming) {
      return;
    }
    this.streaming = true;
    this.openStream();
  }

  stopStream(): void {
    this.streaming = false;
    if (this.reconnectTimer) {
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = undefined;
    }
    this.streamRequest?.destroy();
    this.streamRequest = undefined;
    this.setStreamState("closed");
  }

  dispose(): void {
    this.stopStream();
    this.disposed = true;
    this.workersSignal.clear();
    this.streamStateSignal.clear();
    this.streamErrorSignal.clear();
    this.streamEventSignal.clear();
  }

  private openStream(): void {
    this.setStreamState("connecting");
    const req = this.transport().request(this.url + "/v1/stream", {
      method: "GET",
      headers: { ...this.authHeaders(), Accept: "text/event-stream", "Cache-Control": "no-cache" },
    });
    this.streamRequest = req;
    let failed = false;
    const fail = (err: BrokerError) => {
      if (failed || req !== this.streamRequest) {
        return;
      }
      failed = true;
      this.streamRequest = undefined;
      req.destroy();
      this.streamErrorSignal.fire(err);
      if (err.kind === "unauthorized" || !this.streaming) {
        // Retrying with the same token cannot help.
        this.streaming = false;
        this.setStreamState("closed");
        return;
      }
      this.scheduleReconnect();
    };
    req.on("response", (res) => {
      const status = res.statusCode ?? 0;
      if (status !== 200) {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => fail(this.statusError(status, Buffer.concat(chunks).toString("utf8"), "GET /v1/stream")));
        res.on("error", (err) => fail(this.networkError(err, "GET /v1/stream")));
        return;
      }
      this.backoffMs = this.minBackoffMs;
      this.setStreamState("open");
      const parser = new SseParser((event, data) => this.dispatch(event, data));
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => parser.push(chunk));
      res.on("error", (err) => fail(this.networkError(err, "GET /v1/stream")));
      res.on("end", () => fail(new BrokerError("network", `The broker at ${this.url} closed the event stream; reconnecting.`, this.url)));
    });
    req.on("error", (err) => fail(err instanceof BrokerError ? err : this.networkError(err, "GET /v1/stream")));
    req.end();
  }

  private scheduleReconnect(): void {
    this.setStreamState("connecting");
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.maxBackoffMs);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.streaming && !this.disposed) {
        this.openStream();
      }
    }, delay);
  }

  private dispatch(event: string, data: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      this.streamErrorSignal.fire(new BrokerError("protocol", `The broker sent a "${event}" event whose data is not JSON: ${data.slice(0, 200)}`, this.url));
      return;
    }
    this.streamEventSignal.fire({ event, data: parsed });
    if (event === "workers" && Array.isArray(parsed)) {
      this.workersSignal.fire(parsed as WorkerInfo[]);
    }
  }

  private setStreamState(state: StreamState): void {
    if (state !== this._streamState) {
      this._streamState = state;
      this.streamStateSignal.fire(state);
    }
  }

  private transport(): typeof http | typeof https {
    return this.url.startsWith("https:") ? https : http;
  }

  private authHeaders(): Record<string, string> {
    // The broker's log names who changed the cluster set: this window, by its process id.
    return { Authorization: `Bearer ${this.token}`, "User-Agent": `raysleuth-vscode (pid ${process.pid})` };
  }

  private statusError(status: number, text: string, what: string): BrokerError {
    let body: Partial<BrokerErrorBody> = {};
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === "object") {
        body = parsed as Partial<BrokerErrorBody>;
      }
    } catch {
      body = { error: text.trim().slice(0, 200) || undefined };
    }
    const detail = [body.error, body.hint].filter(Boolean).join(" ");
    if (status === 401) {
      return new BrokerError(
        "unauthorized",
        `The broker at ${this.url} rejected the token (401 Unauthorized)${detail ? `: ${detail}` : "."} ` +
          `Check raySleuth.tokenFile or RAYSLEUTH_TOKEN, or the token_file named in broker.json.`,
        this.url,
        status,
        body.hint,
        body.error,
      );
    }
    return new BrokerError("http", `Broker ${what} at ${this.url} failed (${status})${detail ? `: ${detail}` : "."}`, this.url, status, body.hint, body.error);
  }

  private networkError(err: Error & { code?: string }, what: string): BrokerError {
    if (err.code === "ECONNREFUSED") {
      return new BrokerError(
        "refused",
        `Cannot reach the broker at ${this.url} (connection refused). Start it with "raysleuth broker" or set raySleuth.brokerAddress.`,
        this.url,
      );
    }
    return new BrokerError("network", `Broker ${what} at ${this.url} failed: ${err.message}. Check that the broker runs ("raysleuth doctor").`, this.url);
  }
}

/** Splits a text/event-stream into (event, data) pairs, as the SSE spec says. */
export class SseParser {
  private buffer = "";
  private event = "";
  private data: string[] = [];

  constructor(private readonly onEvent: (event: string, data: string) => void) {}

  push(chunk: string): void {
    this.buffer += chunk;
    let idx: number;
    while ((idx = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buffer.slice(0, idx);
      const sepLen = this.buffer.startsWith("\r\n", idx) ? 2 : 1;
      // A lone "\r" at the end may be the first half of "\r\n": wait for more.
      if (sepLen === 1 && this.buffer[idx] === "\r" && idx === this.buffer.length - 1) {
        break;
      }
      this.buffer = this.buffer.slice(idx + sepLen);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === "") {
      if (this.data.length) {
        this.onEvent(this.event || "message", this.data.join("\n"));
      }
      this.event = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) {
      return; // comment / keep-alive
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) {
      value = value.slice(1);
    }
    if (field === "event") {
      this.event = value;
    } else if (field === "data") {
      this.data.push(value);
    }
  }
}
