// The in-process debug adapter of the one "Ray cluster" parent session: a
// container the worker sessions hang under in the Call Stack view. It debugs
// nothing and never talks to the broker; it must never fail a request it knows.
// No vscode import: @vscode/debugadapter's DebugSession speaks the protocol.
import { DebugSession, Response, TerminatedEvent } from "@vscode/debugadapter";
import type { DebugProtocol } from "@vscode/debugprotocol";

/** The requests this session answers; any other one needs a worker session. */
const KNOWN = new Set(["initialize", "attach", "launch", "configurationDone", "threads", "terminate", "disconnect"]);

export class ClusterSessionAdapter extends DebugSession {
  toString(): string {
    return "ClusterSessionAdapter";
  }

  protected dispatchRequest(request: DebugProtocol.Request): void {
    if (KNOWN.has(request.command)) {
      super.dispatchRequest(request);
      return;
    }
    const response: DebugProtocol.Response = new Response(request);
    response.success = false;
    response.message = `The Ray cluster session only groups worker sessions: '${request.command}' needs a worker session.`;
    this.sendResponse(response);
  }

  protected initializeRequest(response: DebugProtocol.InitializeResponse, _args: DebugProtocol.InitializeRequestArguments): void {
    // No `initialized` event follows on purpose: this session takes no
    // breakpoints (the worker sessions do), so VS Code sends it none.
    response.body = { supportsConfigurationDoneRequest: true, supportsTerminateRequest: true };
    this.sendResponse(response);
  }

  protected threadsRequest(response: DebugProtocol.ThreadsResponse): void {
    response.body = { threads: [] };
    this.sendResponse(response);
  }

  protected terminateRequest(response: DebugProtocol.TerminateResponse, _args: DebugProtocol.TerminateArguments): void {
    this.sendResponse(response);
    this.sendEvent(new TerminatedEvent());
  }

  protected disconnectRequest(response: DebugProtocol.DisconnectResponse, _args: DebugProtocol.DisconnectArguments): void {
    this.sendResponse(response); // the base class would shut down, see shutdown()
  }

  /** The base class ends the process when no one listens (it expects to be an adapter process of its own): never here, inside the extension host. */
  shutdown(): void {
    // Nothing to end: the session lives in the extension host's process.
  }
}
