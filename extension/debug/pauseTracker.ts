// Which pauses raySleuth.autoAttach opens a session for: each pause once (a
// repeat pause at the same line is a new pause), never a crash held for
// Inspect, lowest rank first. Pure, no vscode import: tested in plain mocha.
import { WorkerInfo } from "../broker/types";
import { attachable } from "../cluster/workerGrouping";

/**
 * Names one pause. The broker's `paused_since` changes with every new pause, so
 * a worker that stops at the same line again is a new pause (issue #13, item 3);
 * a broker without it falls back to where and why the worker stopped.
 */
export function pauseKey(w: WorkerInfo): string {
  const at = w.paused_at;
  // The place is part of the key even with paused_since: a worker that a closed session let run
  // can read "paused, place unknown" (Ray's State API, sampled late) and then paused at the line
  // again under the same paused_since; that is a new pause, not the one whose session was closed.
  const place = at ? `${at.path}:${at.line}` : "?";
  if (typeof w.paused_since === "number") {
    return `${w.id}\u0000since ${w.paused_since}\u0000${place}`;
  }
  return `${w.id}\u0000${place}:${at?.reason ?? ""}`;
}

/**
 * A crashed worker held for an attach, or stopped at its crash: "Inspect" on the
 * crash opens it, auto-attach never does (a second session on the same worker
 * conflicts with the crash session; issue #13, item 2).
 */
export function isHeldCrash(w: WorkerInfo): boolean {
  return w.state === "crashed" || (typeof w.held_until === "number" && w.held_until > 0) || (w.paused_at?.reason === "exception" && !!w.crash);
}

function byRank(a: WorkerInfo, b: WorkerInfo): number {
  return (a.rank ?? Number.POSITIVE_INFINITY) - (b.rank ?? Number.POSITIVE_INFINITY) || (a.pid ?? 0) - (b.pid ?? 0);
}

/**
 * How long after a crash's hold a "paused" state with no place is still the hold's tail: Ray's
 * State API counts the held thread as paused (worker_paused_by_debugger) and the broker's next
 * State API sample comes seconds after the hold ended.
 */
export const HOLD_TAIL_S = 15;

export class PauseTracker {
  /** Pauses already looked at: attached, or a session was open then. Only the current pauses are kept. */
  private readonly seen = new Set<string>();
  /** Worker id → until when (epoch s) a pause with no place is the tail of a crash's hold. */
  private readonly holds = new Map<string, number>();
  /** "id, paused_since" of pauses seen with a place: the same pause without one is its stale tail. */
  private readonly placed = new Set<string>();

  get size(): number {
    return this.seen.size;
  }

  /**
   * The pauses to open a session for now, lowest rank first; they count as seen
   * from here on. `hasSession` says whether a worker has a session in this
   * window; `on` is raySleuth.autoAttach (off: nothing is opened, nothing is marked).
   */
  take(workers: readonly WorkerInfo[], hasSession: (workerId: string) => boolean, on: boolean, now: number = Date.now() / 1000): WorkerInfo[] {
    for (const w of workers) {
      if (typeof w.held_until === "number" && w.held_until > 0) {
        this.holds.set(w.id, Math.max(w.held_until, now) + HOLD_TAIL_S);
      }
    }
    for (const [id, until] of this.holds) {
      if (until < now) {
        this.holds.delete(id);
      }
    }
    const paused = workers.filter((w) => w.state === "paused" && attachable(w));
    const current = new Set(paused.map(pauseKey));
    for (const key of this.seen) {
      if (!current.has(key)) {
        this.seen.delete(key); // that pause is over: the next one at the same place is new
      }
    }
    const sinceOf = (w: WorkerInfo) => `${w.id}\u0000${String(w.paused_since)}`;
    const pausedSince = new Set(paused.filter((w) => typeof w.paused_since === "number").map(sinceOf));
    for (const k of this.placed) {
      if (!pausedSince.has(k)) {
        this.placed.delete(k);
      }
    }
    const out: WorkerInfo[] = [];
    for (const w of paused) {
      if (w.paused_at && typeof w.paused_since === "number") {
        this.placed.add(sinceOf(w));
      }
      const key = pauseKey(w);
      if (this.seen.has(key)) {
        continue;
      }
      // A pause that lost its place under the same paused_since: the worker was let go (a session
      // closed) and Ray's State API, sampled late, still counts it paused. Not a pause to open.
      const staleTail = !w.paused_at && this.placed.has(sinceOf(w));
      const holdTail = staleTail || (!w.paused_at && (this.holds.get(w.id) ?? 0) >= now);
      if (hasSession(w.id) || isHeldCrash(w) || holdTail) {
        this.seen.add(key); // ending that session must not reopen one for the same pause
        continue;
      }
      if (!on) {
        continue;
      }
      this.seen.add(key);
      out.push(w);
    }
    return out.sort(byRank);
  }
}
