// The in-process debug adapter of the one "Ray cluster" parent session: a
// container the worker sessions hang under in the Call Stack view. It debugs
// nothing and never talks to the broker; it must never fail a request it knows.
// Its one thread stands for the worker sessions: stopped while every one of
// them is paused (so the parent does not say Running; issue #13), and its
// Continue / Step / Pause act on all of them through the actions it was given.
// No vscode import: @vscode/debugadapter's DebugSession speaks the protocol.
import { ContinuedEvent, DebugSession, Response, StoppedEvent, TerminatedEvent } from "@vscode/debugadapter";
import type { DebugProtocol } from "@vscode/debugprotocol";

/** The requests this session answers; any other one needs a worker session. */
const KNOWN = new Set(["initialize", "attach", "launch", "configurationDone", "threads", "terminate", "disconnect"]);
/** Answered when the session was given group actions. */
const GROUP = new Set(["stackTrace", "continue", "pause", "next", "stepIn", "stepOut"]);

/** A step of every paused worker session at once. */
export type GroupStep = "next" | "stepIn" | "stepOut";

/** The thread that stands for the worker sessions. */
export const GROUP_THREAD_ID = 1;

/** What Continue, Step and Pause on the parent do: act on every worker session under it. */
export interface ClusterGroupActions {
  continueAll(): Promise<void>;
  pauseAll(): Promise<void>;
  stepAll(step: GroupStep): Promise<void>;
}

export class ClusterSessionAdapter extends DebugSession {
  private children = 0;
  private paused = 0;
  private stopped = false;

  constructor(private readonly group?: ClusterGroupActions) {
    super();
  }

  toString(): string {
    return `ClusterSessionAdapter[${this.paused}/${this.children} paused]`;
  }

  /** The worker sessions under the parent now, and how many of them are paused. */
  setChildren(count: number, paused: number): void {
    this.children = count;
    this.paused = paused;
    const all = count > 0 && paused === count;
    if (all && !this.stopped) {
      this.stopped = true;
      const e = new StoppedEvent("pause", GROUP_THREAD_ID) as DebugProtocol.StoppedEvent;
      e.body.description = `all ${count} worker session${count === 1 ? "" : "s"} paused`;
      e.body.allThreadsStopped = true;
      e.body.preserveFocusHint = true; // the worker's frame keeps the editor
      this.sendEvent(e);
    } else if (!all && this.stopped) {
      this.stopped = false;
      this.sendEvent(new ContinuedEvent(GROUP_THREAD_ID, true));
    }
  }

  private get threadName(): string {
    return `${this.children} worker session${this.children === 1 ? "" : "s"}, ${this.paused} paused`;
  }

  protected dispatchRequest(request: DebugProtocol.Request): void {
    if (KNOWN.has(request.command) || (this.group && GROUP.has(request.command))) {
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
    // Only while every worker session is paused: a running parent lists no thread, as it always
    // did, so the Call Stack renders the worker sessions under it as before.
    response.body = { threads: this.stopped ? [{ id: GROUP_THREAD_ID, name: this.threadName }] : [] };
    this.sendResponse(response);
  }

  protected stackTraceRequest(response: DebugProtocol.StackTraceResponse): void {
    response.body = { stackFrames: [], totalFrames: 0 }; // the frames are in the worker sessions
    this.sendResponse(response);
  }

  protected continueRequest(response: DebugProtocol.ContinueResponse): void {
    response.body = { allThreadsContinued: true };
    this.act(response, (g) => g.continueAll());
  }

  protected pauseRequest(response: DebugProtocol.PauseResponse): void {
    this.act(response, (g) => g.pauseAll());
  }

  protected nextRequest(response: DebugProtocol.NextResponse): void {
    this.act(response, (g) => g.stepAll("next"));
  }

  protected stepInRequest(response: DebugProtocol.StepInResponse): void {
    this.act(response, (g) => g.stepAll("stepIn"));
  }

  protected stepOutRequest(response: DebugProtocol.StepOutResponse): void {
    this.act(response, (g) => g.stepAll("stepOut"));
  }

  private act(response: DebugProtocol.Response, action: (g: ClusterGroupActions) => Promise<void>): void {
    const group = this.group;
    if (!group) {
      return;
    }
    action(group).then(
      () => this.sendResponse(response),
      (err: unknown) => this.sendErrorResponse(response, 1, `Ray Sleuth: ${err instanceof Error ? err.message : String(err)}`),
    );
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
