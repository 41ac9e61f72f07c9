// The debug adapter of a worker session: an in-process pipe to the broker's DAP front door that
// connects itself, proves the port's peer is a process of ours (or root's) on loopback before a
// byte goes out (broker/peerCheck.ts), and swaps the attach request's secret for a fresh
// single-use attach ticket (POST /v1/tickets) at the moment it is sent. VS Code's own
// DebugAdapterServer would connect with no such check, and the token in a resolved configuration
// would go to whoever holds the port (a relay on a dead broker's port) and stay reusable; a ticket
// fetched per attach also survives a session restart, which re-sends the same configuration.
// No vscode import: VS Code takes it as a DebugAdapterInlineImplementation.
import type * as net from "net";
import { connectChecked } from "../broker/peerCheck";

/** A DAP message as it crosses the pipe. */
export interface DapMessage {
  seq?: number;
  type?: string;
  command?: string;
  arguments?: Record<string, unknown>;
  [key: string]: unknown;
}

interface Disposable {
  dispose(): void;
}

/** Rewrites an attach request's arguments (the ticket in, the token out); rejects with what to tell the user. */
export type AttachPreparer = (args: Record<string, unknown>) => Promise<Record<string, unknown>>;

/** A DAP message's wire form: `Content-Length: N\r\n\r\n` and N bytes of JSON. */
export function frame(message: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(message), "utf8");
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "ascii"), body]);
}

/** Splits `buffer` into whole messages; returns them and what is left of a message still coming. */
export function unframe(buffer: Buffer): { messages: DapMessage[]; rest: Buffer } {
  const messages: DapMessage[] = [];
  let rest = buffer;
  for (;;) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) {
      return { messages, rest };
    }
    const m = /content-length:\s*(\d+)/i.exec(rest.subarray(0, end).toString("ascii"));
    if (!m) {
      throw new Error(`a DAP header without Content-Length: ${JSON.stringify(rest.subarray(0, Math.min(end, 200)).toString("ascii"))}`);
    }
    const start = end + 4;
    const length = Number(m[1]);
    if (rest.length < start + length) {
      return { messages, rest };
    }
    messages.push(JSON.parse(rest.subarray(start, start + length).toString("utf8")) as DapMessage);
    rest = rest.subarray(start + length);
  }
}

export class BrokerDapAdapter implements Disposable {
  private readonly listeners = new Set<(m: DapMessage) => void>();
  private socket: net.Socket | undefined;
  /** Why nothing can be sent (the peer check refused, the connection failed or ended). */
  private failure: string | undefined;
  private readonly connected: Promise<void>;
  /** Requests go out in order; an attach waits for its ticket. */
  private chain: Promise<void> = Promise.resolve();
  private pending: Buffer = Buffer.alloc(0);
  private disposed = false;

  constructor(
    readonly host: string,
    readonly port: number,
    private readonly prepareAttach: AttachPreparer,
    connect: (host: string, port: number) => Promise<net.Socket> = (h, p) => connectChecked(h, p, `${h}:${p}`, 10_000),
  ) {
    this.connected = connect(host, port).then(
      (socket) => this.adopt(socket),
      (err: unknown) => {
        this.failure = `Ray Sleuth: ${err instanceof Error ? err.message : String(err)}`;
      },
    );
  }

  toString(): string {
    return `BrokerDapAdapter[${this.host}:${this.port}${this.failure ? " failed" : ""}]`;
  }

  readonly onDidSendMessage = (listener: (m: DapMessage) => void, thisArgs?: unknown, disposables?: Disposable[]): Disposable => {
    const l = (m: DapMessage) => listener.call(thisArgs, m);
    this.listeners.add(l);
    const d = { dispose: () => this.listeners.delete(l) };
    disposables?.push(d);
    return d;
  };

  handleMessage(message: DapMessage): void {
    this.chain = this.chain.then(() => this.forward(message));
  }

  dispose(): void {
    this.disposed = true;
    this.socket?.destroy();
    this.listeners.clear();
  }

  private adopt(socket: net.Socket): void {
    if (this.disposed) {
      socket.destroy();
      return;
    }
    this.socket = socket;
    socket.on("data", (chunk: Buffer) => this.received(chunk));
    socket.on("error", (err) => (this.failure ??= `Ray Sleuth: the connection to the broker's debug port failed: ${err.message}`));
    socket.on("close", () => {
      this.failure ??= "Ray Sleuth: the broker closed the debug connection.";
      if (!this.disposed) {
        this.emit({ seq: 0, type: "event", event: "terminated" });
      }
    });
  }

  private received(chunk: Buffer): void {
    try {
      const { messages, rest } = unframe(Buffer.concat([this.pending, chunk]));
      this.pending = rest;
      messages.forEach((m) => this.emit(m));
    } catch (err) {
      this.failure = `Ray Sleuth: the broker's debug port sent something that is not DAP (${err instanceof Error ? err.message : String(err)}).`;
      this.socket?.destroy();
    }
  }

  private async forward(message: DapMessage): Promise<void> {
    await this.connected;
    let out = message;
    if (!this.failure && message.type === "request" && message.command === "attach") {
      try {
        out = { ...message, arguments: await this.prepareAttach({ ...(message.arguments ?? {}) }) };
      } catch (err) {
        this.answer(message, false, `Ray Sleuth: cannot get an attach ticket from the broker: ${err instanceof Error ? err.message : String(err)}`);
        return;
      }
    }
    if (this.failure || !this.socket || this.socket.destroyed) {
      const closing = message.command === "disconnect" || message.command === "terminate";
      this.answer(message, closing, this.failure ?? "Ray Sleuth: the debug connection is closed.");
      return;
    }
    this.socket.write(frame(out));
  }

  /** Answers a request here (nothing reached the broker). */
  private answer(request: DapMessage, success: boolean, message: string): void {
    if (request.type !== "request") {
      return;
    }
    this.emit({ seq: 0, type: "response", request_seq: request.seq, command: request.command, success, ...(success ? {} : { message }) });
  }

  private emit(message: DapMessage): void {
    for (const l of [...this.listeners]) {
      l(message);
    }
  }
}
