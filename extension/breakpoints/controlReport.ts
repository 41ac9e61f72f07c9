// What "Pause Rank…" and "Continue All Paused" tell the user about the broker's
// answer: which ranks paused, which will pause later (and why), which were left
// alone, which pending pauses a continue called off. Pure, no vscode import.
import { ContinueReply, PauseReply, SkippedWorker, WorkerInfo } from "../broker/types";

export interface ControlReport {
  /**
   * warning: a worker did not do what was asked (yet); info: worth a notification
   * (nothing to do, a pause called off); status: all done, the status bar says so.
   */
  level: "status" | "info" | "warning";
  text: string;
}

/** "rank 3" for a ranked worker, else "pid 4242", else the id's start. */
export function whoIs(workerId: string, workers: readonly WorkerInfo[]): string {
  const w = workers.find((x) => x.id === workerId);
  if (w && w.rank !== null && w.rank !== undefined) {
    return `rank ${w.rank}`;
  }
  return w ? `pid ${w.pid}` : `worker ${workerId.slice(0, 8)}`;
}

function names(ids: readonly string[], workers: readonly WorkerInfo[]): string {
  return ids.map((id) => whoIs(id, workers)).join(", ");
}

function reasons(list: readonly SkippedWorker[], workers: readonly WorkerInfo[]): string {
  return list.map((s) => `${whoIs(s.worker, workers)} (${s.reason})`).join("; ");
}

/** The answer of POST /v1/pause for the workers asked: `asked` names them ("with rank 1,3", "of group g"). */
export function pauseReport(reply: PauseReply, asked: string, workers: readonly WorkerInfo[]): ControlReport {
  const paused = reply.paused ?? [];
  const pending = reply.pending ?? [];
  const skipped = reply.skipped ?? [];
  if (!paused.length && !pending.length && !skipped.length) {
    return { level: "info", text: `Ray Sleuth: no running worker ${asked} to pause.` };
  }
  const parts: string[] = [];
  if (paused.length) {
    parts.push(`paused ${names(paused, workers)}`);
  }
  if (pending.length) {
    parts.push(`${reasons(pending, workers)} will pause when it returns to Python ("Continue All Paused" calls that off)`);
  }
  if (skipped.length) {
    parts.push(`left ${reasons(skipped, workers)} as they were`);
  }
  return { level: pending.length || skipped.length ? "warning" : "status", text: `Ray Sleuth: ${parts.join("; ")}.` };
}

/** The answer of POST /v1/continue. */
export function continueReport(reply: ContinueReply, workers: readonly WorkerInfo[]): ControlReport {
  const continued = reply.continued ?? [];
  const cancelled = reply.cancelled ?? [];
  const skipped = reply.skipped ?? [];
  if (!continued.length && !cancelled.length && !skipped.length) {
    return { level: "info", text: "Ray Sleuth: no worker is paused." };
  }
  const parts: string[] = [];
  if (continued.length) {
    parts.push(`continued ${names(continued, workers)}`);
  }
  if (cancelled.length) {
    parts.push(`called off the pending pause of ${names(cancelled, workers)}`);
  }
  if (skipped.length) {
    parts.push(`left ${reasons(skipped, workers)} as they were`);
  }
  return { level: skipped.length ? "warning" : cancelled.length ? "info" : "status", text: `Ray Sleuth: ${parts.join("; ")}.` };
}
