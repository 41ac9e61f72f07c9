// One debug session per worker, all under one "Ray cluster" parent session
// (started on demand, stopped when its last worker session ends). Knows which
// worker has a session in this window, so a second one is never started.
import * as vscode from "vscode";
import { CLUSTER_SESSION_NAME, Commands, DEBUG_TYPE } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { WorkerInfo } from "../broker/types";
import { ClusterState } from "../cluster/clusterState";
import { attachable } from "../cluster/workerGrouping";
import type { BrokerAccess } from "../broker/brokerConnection";
import { sessionKey, sessionName, SleuthAttachConfig } from "./attachConfig";
import { ClusterSessionAdapter, GroupStep } from "./clusterSessionAdapter";
import type { GroupChoice } from "./groupChoice";
import { nextStop, STEP_BOUND_MS, stepTogether } from "./groupStep";

/** A Cluster view element as a command gets it (the view's own type stays with the view). */
export interface TreeElement {
  kind: string;
  worker?: WorkerInfo;
}

/** What raySleuth.attachWorker accepts: a tree item's element (a click), a worker, a worker id, or nothing (pick). */
export type AttachTarget = TreeElement | WorkerInfo | string | undefined;

export class WorkerSessionService implements vscode.Disposable {
  private parent: vscode.DebugSession | undefined;
  private parentStarting: Promise<vscode.DebugSession | undefined> | undefined;
  private readonly sessions = new Map<string, vscode.DebugSession>();
  private readonly starting = new Map<string, Promise<vscode.DebugSession | undefined>>();
  /** Ids of worker sessions VS Code is stopping (their disconnect or terminate request went out). */
  private readonly stopping = new Set<string>();
  private readonly started = new vscode.EventEmitter<vscode.DebugSession>();
  /** Fires a session's id at each of its stopped events. */
  private readonly stoppedEvents = new vscode.EventEmitter<string>();
  private readonly disposables: vscode.Disposable[] = [];

  /** Session id → the thread its last stopped event named, while it stays stopped. */
  private readonly stoppedThread = new Map<string, number>();
  /** The parent session's in-process adapter, while it runs. */
  private clusterAdapter: ClusterSessionAdapter | undefined;

  constructor(
    private readonly state: ClusterState,
    /** For Continue / Pause on the parent session: all its worker sessions at once. */
    private readonly broker?: BrokerAccess,
    /** The rank group the parent session acts on, when one is chosen. */
    private readonly groups?: GroupChoice,
  ) {
    this.disposables.push(
      this.started,
      this.stoppedEvents,
      vscode.debug.onDidStartDebugSession((s) => this.sessionStarted(s)),
      vscode.debug.onDidTerminateDebugSession((s) => this.sessionEnded(s)),
      vscode.debug.registerDebugAdapterTrackerFactory(DEBUG_TYPE, {
        // The disconnect (or terminate) request is what makes the broker let the worker run; VS
        // Code reports the session ended only after the adapter closed, a second later or so.
        createDebugAdapterTracker: (session) => ({
          onWillReceiveMessage: (m: { type?: string; command?: string }) => {
            if (m.type === "request" && (m.command === "disconnect" || m.command === "terminate")) {
              this.stopping.add(session.id);
            }
          },
          onWillStopSession: () => this.stopping.add(session.id),
          onDidSendMessage: (m: { type?: string; event?: string; body?: { threadId?: number; allThreadsContinued?: boolean } }) => {
            if (m.type === "event" && m.event === "stopped" && typeof m.body?.threadId === "number") {
              this.stoppedThread.set(session.id, m.body.threadId);
              this.stoppedEvents.fire(session.id);
            } else if (m.type === "event" && m.event === "continued" && (m.body?.allThreadsContinued !== false || m.body.threadId === this.stoppedThread.get(session.id))) {
              this.stoppedThread.delete(session.id);
            }
          },
        }),
      }),
      state.onDidChange(() => this.updateParent()),
    );
  }

  /** The adapter for the "Ray cluster" parent session (the adapter factory asks). */
  newClusterAdapter(): ClusterSessionAdapter {
    const adapter = new ClusterSessionAdapter({
      continueAll: () => this.actOnChildren("continue"),
      pauseAll: () => this.actOnChildren("pause"),
      stepAll: (step) => this.stepChildren(step),
    });
    this.clusterAdapter = adapter;
    setTimeout(() => this.updateParent(), 0); // once VS Code has the adapter
    return adapter;
  }

  /** Worker ids of the sessions under the parent. */
  private childWorkers(): string[] {
    const parent = this.parent;
    return [...this.sessions]
      .filter(([key, s]) => key.startsWith("worker:") && (!parent || s.parentSession?.id === parent.id))
      .map(([key]) => key.slice("worker:".length));
  }

  /** The parent shows Paused while every worker session under it is paused (issue #13, item 5). */
  private updateParent(): void {
    const ids = this.childWorkers();
    const paused = ids.filter((id) => this.state.workers.find((w) => w.id === id)?.state === "paused").length;
    this.clusterAdapter?.setChildren(ids.length, paused);
  }

  private async actOnChildren(what: "continue" | "pause"): Promise<void> {
    const client = await this.broker?.ensureClient();
    const group = this.groups?.current;
    const workers = this.childWorkers();
    if (!client || (workers.length === 0 && !group)) {
      return;
    }
    // A chosen group plays together: all its members, attached here or not (issue 27).
    const selector = group ? { group } : { workers };
    const what2 = group ? `rank group ${group}` : `${workers.length} worker session(s)`;
    const reply = what === "continue" ? await client.continueWorkers(selector) : await client.pauseWorkers(selector);
    log.info(`Ray cluster session: ${what} on ${what2}: ${JSON.stringify(reply)}`);
    const skipped = reply.skipped ?? [];
    if (skipped.length) {
      // Said, not only logged: a Pause that did nothing must not look like one that worked.
      const names = skipped.map((s) => `${this.labelOf(s.worker)}: ${s.reason}`).join("; ");
      void vsapi.showWarningMessage(`Ray Sleuth: ${what} skipped ${skipped.length} worker(s) of ${what2}: ${names}`);
    }
  }

  private labelOf(workerId: string): string {
    const w = this.state.workers.find((x) => x.id === workerId);
    return w ? (w.rank !== null ? `rank ${w.rank}` : `pid ${w.pid ?? "?"}`) : workerId.slice(0, 8);
  }

  /**
   * Step Over / Into / Out on the parent, or raySleuth.stepGroup: the same step in every paused
   * worker session under it, or with a rank group chosen in its members (see groupStep.ts).
   */
  async stepChildren(step: GroupStep = "next"): Promise<void> {
    const parent = this.parent;
    const members = await this.groups?.members();
    const under = [...this.sessions].filter(([key, s]) => key.startsWith("worker:") && (!parent || s.parentSession?.id === parent.id));
    const chosen = members ? under.filter(([key]) => members.includes(key.slice("worker:".length))) : under;
    await stepTogether({
      step,
      group: this.groups?.current,
      paused: chosen.flatMap(([key, s]) => {
        const threadId = this.stoppedThread.get(s.id);
        return threadId === undefined ? [] : [{ worker: key.slice("worker:".length), session: s, threadId }];
      }),
      viaBroker: (members ?? []).filter((id) => !this.sessions.has(`worker:${id}`) && this.state.workers.find((w) => w.id === id)?.state === "paused"),
      broker: this.broker,
      nextStop: (id) => nextStop(this.stoppedEvents.event, id, STEP_BOUND_MS),
      labelOf: (id) => this.labelOf(id),
    });
  }

  toString(): string {
    return `WorkerSessions[${this.sessions.size}]`;
  }

  /** The parent session, while it runs. */
  get clusterSession(): vscode.DebugSession | undefined {
    return this.parent;
  }

  /** The live session whose key (see attachConfig.sessionKey) is this one; not one that is being stopped. */
  sessionFor(key: string): vscode.DebugSession | undefined {
    const s = this.sessions.get(key);
    return s && !this.stopping.has(s.id) ? s : undefined;
  }

  /**
   * True while the worker has a session in this window, or one is starting. A session
   * being stopped does not count: the broker lets its worker run as soon as it disconnects,
   * and a pause that comes before VS Code reports the session ended is a new one (issue #13).
   */
  hasSession(workerId: string): boolean {
    const key = `worker:${workerId}`;
    return this.sessionFor(key) !== undefined || this.starting.has(key);
  }

  /** Resolves once the session has ended (at most 10 s). */
  private ended(session: vscode.DebugSession): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(), 10_000);
      const sub = vscode.debug.onDidTerminateDebugSession((s) => s.id === session.id && done());
      const done = () => {
        clearTimeout(timer);
        sub.dispose();
        resolve();
      };
      if (![...this.sessions.values()].some((s) => s.id === session.id)) {
        done();
      }
    });
  }

  /** Brings an existing session forward: VS Code has no API to focus a session, so show the Call Stack and say so. */
  focus(session: vscode.DebugSession): void {
    log.info(`${session.name} already has a debug session in this window; not starting another`);
    vscode.window.setStatusBarMessage(`Ray Sleuth: ${session.name} is already being debugged in this window`, 5000);
    void vsapi.executeCommand("workbench.debug.action.focusCallStackView").then(undefined, (e: unknown) => swallow("Focusing the Call Stack failed", e));
  }

  /** raySleuth.attachWorker: a session for the worker (its existing one if it has one). */
  async attachWorker(target: AttachTarget): Promise<vscode.DebugSession | undefined> {
    let worker = this.workerOf(target);
    if (target === undefined) {
      const id = await vsapi.executeCommand<string | undefined>(Commands.pickWorker);
      if (!id) {
        return undefined;
      }
      worker = this.workerOf(id);
    }
    if (!worker) {
      void vsapi.showErrorMessage(`Ray Sleuth: the worker ${typeof target === "string" ? target : ""} is not in the Cluster view any more. Refresh the view and pick a live worker.`);
      return undefined;
    }
    if (!attachable(worker)) {
      void vsapi.showErrorMessage(
        worker.agent
          ? `Ray Sleuth: ${sessionName(worker)} has exited; there is nothing to attach to.`
          : `Ray Sleuth: ${sessionName(worker)} has no Ray Sleuth agent. Start the job with RAYSLEUTH=1 in its environment (or raysleuth.init()).`,
      );
      return undefined;
    }
    const key = `worker:${worker.id}`;
    const existing = this.sessionFor(key);
    if (existing) {
      this.focus(existing);
      return existing;
    }
    let pending = this.starting.get(key);
    if (!pending) {
      const w = worker;
      const ending = this.sessions.get(key); // being stopped: the new one starts after it ended
      pending = (ending ? this.ended(ending) : Promise.resolve()).then(() => this.startWorkerSession(w, key)).finally(() => this.starting.delete(key));
      this.starting.set(key, pending);
    }
    return pending;
  }

  /** raySleuth.attachAllPaused: a session for every paused worker that has none yet. */
  async attachAllPaused(): Promise<vscode.DebugSession[]> {
    const paused = this.state.workers.filter((w) => w.state === "paused" && attachable(w) && !this.sessions.has(`worker:${w.id}`));
    if (paused.length === 0) {
      void vsapi.showInformationMessage("Ray Sleuth: no paused worker without a debug session.");
      return [];
    }
    // Started in rank order (the Call Stack lists sessions in the order they start), all at once.
    paused.sort((a, b) => (a.rank ?? Number.POSITIVE_INFINITY) - (b.rank ?? Number.POSITIVE_INFINITY) || (a.pid ?? 0) - (b.pid ?? 0));
    const sessions = await Promise.all(paused.map((w) => this.attachWorker(w)));
    return sessions.filter((s): s is vscode.DebugSession => s !== undefined);
  }

  private workerOf(target: AttachTarget): WorkerInfo | undefined {
    if (typeof target === "string") {
      return this.state.workers.find((w) => w.id === target);
    }
    if (target && "kind" in target) {
      const w = target.kind === "worker" ? target.worker : undefined;
      return w ? (this.state.workers.find((x) => x.id === w.id) ?? w) : undefined;
    }
    return target ? (this.state.workers.find((w) => w.id === target.id) ?? target) : undefined;
  }

  private async startWorkerSession(worker: WorkerInfo, key: string): Promise<vscode.DebugSession | undefined> {
    const parent = await this.ensureParent();
    const config: SleuthAttachConfig = { type: DEBUG_TYPE, request: "attach", name: sessionName(worker), worker: worker.id };
    const seen = this.nextStart((s) => sessionKey(s.configuration as SleuthAttachConfig) === key);
    // lifecycleManagedByParent stays false (unlike vscode-python-debugger's
    // subprocesses): with it, VS Code sends a worker session's stop/restart to
    // the parent, so stopping one worker would end every worker's session.
    const ok = await vscode.debug.startDebugging(this.folder(), config as vscode.DebugConfiguration, parent ? { parentSession: parent, lifecycleManagedByParent: false } : undefined);
    if (!ok) {
      seen.dispose();
      this.stopParentIfEmpty(key);
      return undefined;
    }
    return this.sessions.get(key) ?? (await seen.promise);
  }

  /** A worker session that did not start leaves no empty "Ray cluster" parent behind (issue #13, item 2). */
  private stopParentIfEmpty(failedKey: string): void {
    const parent = this.parent;
    const othersStarting = [...this.starting.keys()].some((k) => k !== failedKey);
    if (!parent || othersStarting || [...this.sessions.values()].some((c) => c.parentSession?.id === parent.id)) {
      return;
    }
    log.info("No worker session under the Ray cluster session: stopping it");
    this.parent = undefined;
    void vscode.debug.stopDebugging(parent).then(undefined, (e: unknown) => swallow("Stopping the Ray cluster session failed", e));
  }

  /** The parent session, started if none runs. Undefined (children start on their own) if it cannot start. */
  private ensureParent(): Promise<vscode.DebugSession | undefined> {
    if (this.parent) {
      return Promise.resolve(this.parent);
    }
    this.parentStarting ??= (async () => {
      const seen = this.nextStart((s) => (s.configuration as SleuthAttachConfig).cluster === true);
      try {
        const ok = await vscode.debug.startDebugging(this.folder(), { type: DEBUG_TYPE, request: "attach", name: CLUSTER_SESSION_NAME, cluster: true });
        if (!ok) {
          seen.dispose();
          log.warn("The Ray cluster parent session did not start; worker sessions start on their own");
          return undefined;
        }
        return this.parent ?? (await seen.promise);
      } finally {
        this.parentStarting = undefined;
      }
    })();
    return this.parentStarting;
  }

  /** Resolves with the next started session that matches (within 10 s; undefined after). */
  private nextStart(match: (s: vscode.DebugSession) => boolean): { promise: Promise<vscode.DebugSession | undefined>; dispose(): void } {
    let sub: vscode.Disposable | undefined;
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      sub?.dispose();
      if (timer) {
        clearTimeout(timer);
      }
    };
    const promise = new Promise<vscode.DebugSession | undefined>((resolve) => {
      sub = this.started.event((s) => {
        if (match(s)) {
          done();
          resolve(s);
        }
      });
      timer = setTimeout(() => {
        done();
        resolve(undefined);
      }, 10_000);
    });
    return { promise, dispose: done };
  }

  private folder(): vscode.WorkspaceFolder | undefined {
    return vscode.workspace.workspaceFolders?.[0];
  }

  private sessionStarted(s: vscode.DebugSession): void {
    if (s.type !== DEBUG_TYPE) {
      return;
    }
    const config = s.configuration as SleuthAttachConfig;
    if (config.cluster) {
      this.parent = s;
    } else {
      const key = sessionKey(config);
      if (key) {
        this.sessions.set(key, s);
      }
      log.info(`Debug session "${s.name}" started${s.parentSession ? ` under "${s.parentSession.name}"` : ""}`);
    }
    this.started.fire(s);
    this.updateParent();
  }

  private sessionEnded(s: vscode.DebugSession): void {
    if (s.type !== DEBUG_TYPE) {
      return;
    }
    this.stoppedThread.delete(s.id);
    if (s === this.parent || s.id === this.parent?.id) {
      this.parent = undefined;
      this.clusterAdapter = undefined;
      // Stopping the cluster session stops every worker session under it.
      for (const child of [...this.sessions.values()].filter((c) => c.parentSession?.id === s.id)) {
        void vscode.debug.stopDebugging(child).then(undefined, (e: unknown) => swallow(`Stopping "${child.name}" failed`, e));
      }
      return;
    }
    this.stopping.delete(s.id);
    for (const [key, session] of this.sessions) {
      if (session.id === s.id) {
        this.sessions.delete(key);
      }
    }
    log.info(`Debug session "${s.name}" ended`);
    this.updateParent();
    const parent = this.parent;
    // A session whose attach failed ends while its start is still counted: it is not "another one starting".
    const endedKey = sessionKey(s.configuration as SleuthAttachConfig);
    const othersStarting = [...this.starting.keys()].some((k) => k !== endedKey);
    if (parent && s.parentSession?.id === parent.id && ![...this.sessions.values()].some((c) => c.parentSession?.id === parent.id) && !othersStarting) {
      // The last worker session under the parent ended: the container goes too.
      this.parent = undefined;
      void vscode.debug.stopDebugging(parent).then(undefined, (e: unknown) => swallow("Stopping the Ray cluster session failed", e));
    }
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
