// The in-process debug adapter of the one "Ray cluster" parent session: a
// container the worker sessions hang under in the Call Stack view. It debugs
// nothing and never talks to the broker; it must never fail a request it knows.
import * as vscode from "vscode";

interface DapRequest {
  seq: number;
  type: "request";
  command: string;
  arguments?: unknown;
}

export class ClusterSessionAdapter implements vscode.DebugAdapter {
  private readonly sent = new vscode.EventEmitter<vscode.DebugProtocolMessage>();
  readonly onDidSendMessage = this.sent.event;
  private seq = 1;

  toString(): string {
    return "ClusterSessionAdapter";
  }

  handleMessage(message: vscode.DebugProtocolMessage): void {
    const msg = message as Partial<DapRequest>;
    if (msg.type !== "request" || typeof msg.command !== "string") {
      return;
    }
    const request = msg as DapRequest;
    switch (request.command) {
      case "initialize":
        // No `initialized` event follows on purpose: this session takes no
        // breakpoints (the worker sessions do), so VS Code sends it none.
        this.respond(request, { supportsConfigurationDoneRequest: true, supportsTerminateRequest: true });
        return;
      case "attach":
      case "launch":
      case "configurationDone":
        this.respond(request);
        return;
      case "threads":
        this.respond(request, { threads: [] });
        return;
      case "terminate":
        this.respond(request);
        this.event("terminated");
        return;
      case "disconnect":
        this.respond(request);
        return;
      default:
        this.respond(request, undefined, `The Ray cluster session only groups worker sessions: '${request.command}' needs a worker session.`);
    }
  }

  private respond(request: DapRequest, body?: unknown, error?: string): void {
    this.sent.fire({
      type: "response",
      seq: this.seq++,
      request_seq: request.seq,
      command: request.command,
      success: error === undefined,
      ...(error === undefined ? {} : { message: error }),
      ...(body === undefined ? {} : { body }),
    } as vscode.DebugProtocolMessage);
  }

  private event(event: string, body?: unknown): void {
    this.sent.fire({ type: "event", seq: this.seq++, event, ...(body === undefined ? {} : { body }) } as vscode.DebugProtocolMessage);
  }

  dispose(): void {
    this.sent.dispose();
  }
}
