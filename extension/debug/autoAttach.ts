// raySleuth.autoAttach: when a worker turns paused (a cluster breakpoint, a
// pause, breakpoint()) and has no session in this window, open its worker
// session, so the editor shows where it stopped. A pause that was seen once
// (same worker, same paused_at) never opens a session again: closing it sticks.
import * as vscode from "vscode";
import { Settings } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { WorkerInfo } from "../broker/types";
import { ClusterState } from "../cluster/clusterState";
import { attachable } from "../cluster/workerGrouping";
import { WorkerSessionService } from "./workerSessions";

/** Names one pause: the worker and where and why it stopped. */
export function pauseKey(w: WorkerInfo): string {
  const at = w.paused_at;
  return `${w.id}\u0000${at ? `${at.path}:${at.line}:${at.reason}` : "?"}`;
}

export class AutoAttachService implements vscode.Disposable {
  /** Pauses already looked at: attached, or a session was open then. */
  private readonly seen = new Set<string>();
  /** Worker sessions this service opened (tests read it). */
  readonly opened: vscode.DebugSession[] = [];
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly state: ClusterState,
    private readonly sessions: WorkerSessionService,
  ) {
    this.subscription = state.onDidChange(() => this.check());
  }

  toString(): string {
    return `AutoAttach[${this.seen.size} pauses seen]`;
  }

  private check(): void {
    if (this.state.status !== "connected") {
      return;
    }
    const on = vsapi.getSetting<boolean>(Settings.autoAttach, true);
    const live = new Set(this.state.workers.filter((w) => w.state !== "exited").map((w) => w.id));
    for (const key of this.seen) {
      if (!live.has(key.slice(0, key.indexOf("\u0000")))) {
        this.seen.delete(key); // the worker is gone: forget its pauses
      }
    }
    for (const w of this.state.workers) {
      if (w.state !== "paused" || !attachable(w)) {
        continue;
      }
      const key = pauseKey(w);
      if (this.seen.has(key)) {
        continue;
      }
      if (this.sessions.hasSession(w.id)) {
        this.seen.add(key); // ending that session must not reopen one for the same pause
        continue;
      }
      if (!on) {
        continue;
      }
      this.seen.add(key);
      const where = w.paused_at ? ` at ${w.paused_at.path}:${w.paused_at.line} (${w.paused_at.reason})` : "";
      log.info(`Worker ${w.id.slice(0, 8)} paused${where}: opening its session (raySleuth.autoAttach)`);
      this.sessions.attachWorker(w).then(
        (s) => s && this.opened.push(s),
        (e: unknown) => swallow(`Auto-attaching to worker ${w.id}`, e),
      );
    }
  }

  dispose(): void {
    this.subscription.dispose();
  }
}
