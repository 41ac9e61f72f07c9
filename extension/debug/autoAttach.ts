// raySleuth.autoAttach: when a worker turns paused (a cluster breakpoint, a
// pause, breakpoint()) and has no session in this window, open its worker
// session, so the editor shows where it stopped. Each pause once (closing its
// session sticks), a crash held for Inspect never, lowest rank first.
import * as vscode from "vscode";
import { Settings } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { ClusterState } from "../cluster/clusterState";
import { PauseTracker } from "./pauseTracker";
import { WorkerSessionService } from "./workerSessions";

export class AutoAttachService implements vscode.Disposable {
  private readonly tracker = new PauseTracker();
  /** Worker sessions this service opened (tests read it). */
  readonly opened: vscode.DebugSession[] = [];
  /** Starts one session after the other, so the Call Stack lists them by rank. */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly state: ClusterState,
    private readonly sessions: WorkerSessionService,
  ) {
    this.subscription = state.onDidChange(() => this.check());
  }

  toString(): string {
    return `AutoAttach[${this.tracker.size} pauses seen]`;
  }

  private check(): void {
    if (this.state.status !== "connected") {
      return;
    }
    const on = vsapi.getSetting<boolean>(Settings.autoAttach, true);
    for (const w of this.tracker.take(this.state.workers, (id) => this.sessions.hasSession(id), on)) {
      const where = w.paused_at ? ` at ${w.paused_at.path}:${w.paused_at.line} (${w.paused_at.reason})` : "";
      log.info(`Worker ${w.id.slice(0, 8)} paused${where}: opening its session (raySleuth.autoAttach)`);
      this.queue = this.queue.then(() =>
        this.sessions.attachWorker(w).then(
          (s) => s && this.opened.push(s),
          (e: unknown) => swallow(`Auto-attaching to worker ${w.id}`, e),
        ),
      );
    }
  }

  dispose(): void {
    this.subscription.dispose();
  }
}
