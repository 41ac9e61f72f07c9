// Converts the cluster's timeline (GET /v1/events) into a Chrome trace-event
// JSON file that Perfetto (ui.perfetto.dev) and chrome://tracing open: one
// thread row per rank (as the timeline view's lanes), each step a slice from
// the rank's previous step to it, each pause a slice from `stopped` to
// `resumed`, everything else an instant. Pure, no vscode import.
import { TimelineEvent } from "../broker/types";
import { HANG_EVENT, RESUMED_EVENT, STOPPED_EVENT, eventLabel, laneKey } from "./timelineModel";

/** One entry of the Trace Event Format (the fields this converter writes). */
export interface TraceEvent {
  name: string;
  ph: "X" | "i" | "M";
  pid: number;
  tid: number;
  /** Microseconds. */
  ts?: number;
  dur?: number;
  /** Instant events: "t" (thread) or "g" (global). */
  s?: "t" | "g";
  cat?: string;
  args?: Record<string, unknown>;
}

export interface ChromeTrace {
  traceEvents: TraceEvent[];
  displayTimeUnit: "ms";
  otherData: Record<string, unknown>;
}

/** The one process of the trace: the Ray cluster. */
export const TRACE_PID = 1;

function micros(seconds: number): number {
  return Math.round(seconds * 1e6);
}

/** A row id per lane: a rank's row is its rank; the others follow from 100,000 on, in order of appearance. */
function tidOf(key: string, tids: Map<string, number>): number {
  let tid = tids.get(key);
  if (tid === undefined) {
    tid = key.startsWith("rank ") ? Number(key.slice(5)) : 100_000 + [...tids.keys()].filter((k) => !k.startsWith("rank ")).length;
    tids.set(key, tid);
  }
  return tid;
}

function argsOf(e: TimelineEvent): Record<string, unknown> {
  return { ...(e.fields ?? {}), seq: e.seq, worker: e.worker, pid: e.pid };
}

/** The trace of `events` (any order); `source` goes into otherData (e.g. the broker's address). */
export function toChromeTrace(events: readonly TimelineEvent[], source = "Ray Sleuth timeline"): ChromeTrace {
  const sorted = [...events].sort((a, b) => a.time - b.time || a.seq - b.seq);
  const tids = new Map<string, number>();
  const out: TraceEvent[] = [];
  const lastStep = new Map<number, TimelineEvent>();
  const stopped = new Map<number, TimelineEvent>();
  for (const e of sorted) {
    const key = laneKey(e);
    const globalHang = e.name === HANG_EVENT && key === "cluster";
    const tid = globalHang ? 0 : tidOf(key, tids);
    const ts = micros(e.time);
    if (e.name === "step") {
      const prev = lastStep.get(tid);
      lastStep.set(tid, e);
      if (prev) {
        out.push({ name: `step ${String(e.fields?.step ?? "?")}`, cat: "step", ph: "X", pid: TRACE_PID, tid, ts: micros(prev.time), dur: Math.max(0, ts - micros(prev.time)), args: argsOf(e) });
        continue;
      }
    } else if (e.name === STOPPED_EVENT) {
      stopped.set(tid, e);
      continue;
    } else if (e.name === RESUMED_EVENT) {
      const start = stopped.get(tid);
      if (start) {
        stopped.delete(tid);
        out.push({ name: eventLabel(start), cat: "stop", ph: "X", pid: TRACE_PID, tid, ts: micros(start.time), dur: Math.max(0, ts - micros(start.time)), args: { ...argsOf(start), ...argsOf(e) } });
        continue;
      }
    }
    out.push({ name: e.name === "step" ? `step ${String(e.fields?.step ?? "?")}` : eventLabel(e), cat: e.name, ph: "i", s: globalHang ? "g" : "t", pid: TRACE_PID, tid, ts, args: argsOf(e) });
  }
  // Pauses still on: an instant where they began.
  for (const [tid, e] of stopped) {
    out.push({ name: `${eventLabel(e)} (still stopped)`, cat: "stop", ph: "i", s: "t", pid: TRACE_PID, tid, ts: micros(e.time), args: argsOf(e) });
  }
  out.sort((a, b) => (a.ts ?? 0) - (b.ts ?? 0));
  const meta: TraceEvent[] = [{ name: "process_name", ph: "M", pid: TRACE_PID, tid: 0, args: { name: "Ray cluster" } }];
  for (const [key, tid] of [...tids].sort((a, b) => a[1] - b[1])) {
    meta.push({ name: "thread_name", ph: "M", pid: TRACE_PID, tid, args: { name: key } });
    meta.push({ name: "thread_sort_index", ph: "M", pid: TRACE_PID, tid, args: { sort_index: tid } });
  }
  return { traceEvents: [...meta, ...out], displayTimeUnit: "ms", otherData: { source, events: events.length } };
}
