// raySleuth.autoAttach: when a worker turns paused (a cluster breakpoint, a
// pause, breakpoint()) and has no session in this window, open its worker
// session, so the editor shows where it stopped. Each pause once (closing its
// session sticks), a crash held for Inspect never, lowest rank first.
import * as vscode from "vscode";
import { Settings } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { WorkerInfo } from "../broker/types";
import { ClusterState } from "../cluster/clusterState";
import { PauseTracker } from "./pauseTracker";
import { WorkerSessionService } from "./workerSessions";

/** How long auto-attach gathers pauses before it opens their sessions, lowest rank first. */
const BATCH_MS = 250;

export class AutoAttachService implements vscode.Disposable {
  private readonly tracker = new PauseTracker();
  /** Worker sessions this service opened (tests read it). */
  readonly opened: vscode.DebugSession[] = [];
  /** Pauses seen in the last BATCH_MS, started together by rank (all-stop pauses a job's ranks within moments). */
  private batch: WorkerInfo[] = [];
  private batchTimer: NodeJS.Timeout | undefined;
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
    const fresh = this.tracker.take(this.state.workers, (id) => this.sessions.hasSession(id), on);
    if (fresh.length) {
      this.batch.push(...fresh);
      this.batchTimer ??= setTimeout(() => this.flush(), BATCH_MS);
    }
  }

  private flush(): void {
    this.batchTimer = undefined;
    const batch = this.batch.sort((a, b) => (a.rank ?? Number.POSITIVE_INFINITY) - (b.rank ?? Number.POSITIVE_INFINITY) || (a.pid ?? 0) - (b.pid ?? 0));
    this.batch = [];
    // Started in rank order, not one after the other: a worker paused in breakpoint() waits for
    // its session, and a Continue All right after the pauses must find every one attached.
    for (const w of batch) {
      const where = w.paused_at ? ` at ${w.paused_at.path}:${w.paused_at.line} (${w.paused_at.reason})` : "";
      log.info(`Worker ${w.id.slice(0, 8)} paused${where}: opening its session (raySleuth.autoAttach)`);
      this.sessions.attachWorker(w).then(
        (s) => s && this.opened.push(s),
        (e: unknown) => swallow(`Auto-attaching to worker ${w.id}`, e),
      );
    }
  }

  dispose(): void {
    if (this.batchTimer) {
      clearTimeout(this.batchTimer);
    }
    this.subscription.dispose();
  }
}
