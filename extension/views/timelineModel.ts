// Pure shaping of the cluster's timeline (GET /v1/events) for the timeline
// view: one lane per rank (workers without a rank by pid, the cluster last),
// steps, crashes, inspect points and suspected hangs as marks, each pause as
// a span from its `stopped` entry to its `resumed` one. No vscode import.
import { TimelineEvent } from "../broker/types";
import { parseRanks } from "../common/ranks";
import { counted } from "../common/text";
import { TimelineKind, TimelineLane, TimelineMark, TimelineModel, TimelineSpan } from "../webview/protocol";

/** Marks kept for the view (the newest): a long run has one step event per rank and step. */
export const MAX_MARKS = 20_000;
/** Events the view keeps in memory (the broker keeps 50,000). */
export const MAX_EVENTS = 50_000;

export const HANG_EVENT = "suspected hang";
export const STOPPED_EVENT = "stopped";
export const RESUMED_EVENT = "resumed";

export function kindOf(e: Pick<TimelineEvent, "name">): TimelineKind {
  switch (e.name) {
    case "step":
      return "step";
    case "crash":
      return "crash";
    case "inspect":
      return "inspect";
    case HANG_EVENT:
      return "hang";
    case STOPPED_EVENT:
    case RESUMED_EVENT:
      return "stop";
    default:
      return "other";
  }
}

/** The lane an event belongs on: "rank N", "pid N", a worker id, or "cluster". */
export function laneKey(e: Pick<TimelineEvent, "rank" | "pid" | "worker">): string {
  if (typeof e.rank === "number") {
    return `rank ${e.rank}`;
  }
  if (e.pid) {
    return `pid ${e.pid}`;
  }
  return e.worker ? `worker ${e.worker.slice(0, 8)}` : "cluster";
}

function short(v: unknown): string {
  if (typeof v === "number") {
    return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
  }
  const text = typeof v === "string" ? v : JSON.stringify(v);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

function fieldsText(fields: Record<string, unknown>, skip: string[] = []): string {
  return Object.entries(fields ?? {})
    .filter(([k]) => !skip.includes(k))
    .map(([k, v]) => `${k}=${short(v)}`)
    .join(" ");
}

/** What a mark's tooltip says about its event. */
export function eventLabel(e: TimelineEvent): string {
  const f = e.fields ?? {};
  switch (kindOf(e)) {
    case "step":
      return `step ${short(f.step ?? "?")}${Object.keys(f).length > 1 ? ` · ${fieldsText(f, ["step"])}` : ""}`;
    case "crash":
      return `crash (${short(f.kind ?? "?")}): ${short(f.error ?? "")}`;
    case "inspect":
      return `inspect ${short(f.name ?? "?")} at step ${short(f.step ?? "?")} (${short(f.entries ?? 0)} entries)`;
    case "hang":
      return `suspected hang: ranks ${short(f.ranks_text ?? "?")}${f.samples ? ` (${short(f.samples)} equal samples)` : ""}`;
    case "stop":
      return e.name === STOPPED_EVENT ? `stopped at ${pathTail(f.path)}:${short(f.line ?? "?")}${f.reason ? ` (${short(f.reason)})` : ""}` : `resumed after ${short(f.seconds ?? "?")} s`;
    default:
      return `${e.name}${Object.keys(f).length ? ` · ${fieldsText(f)}` : ""}`;
  }
}

function pathTail(p: unknown): string {
  return typeof p === "string" ? (p.split(/[\\/]/).pop() ?? p) : "?";
}

/** The lanes a hang names (its ranks_text), else none: it goes on the cluster lane. */
function hangLanes(e: TimelineEvent): string[] {
  const text = e.fields?.ranks_text;
  const ranks = typeof text === "string" ? parseRanks(text) : undefined;
  return ranks ? ranks.map((r) => `rank ${r}`) : [];
}

function laneOrder(a: string, b: string): number {
  const rank = (k: string) => (k.startsWith("rank ") ? Number(k.slice(5)) : Number.POSITIVE_INFINITY);
  const group = (k: string) => (k.startsWith("rank ") ? 0 : k === "cluster" ? 2 : 1);
  return group(a) - group(b) || rank(a) - rank(b) || a.localeCompare(b);
}

/** Adds `incoming` (GET /v1/events?since=last seq) to `known`, by seq, keeping the newest MAX_EVENTS. */
export function mergeEvents(known: readonly TimelineEvent[], incoming: readonly TimelineEvent[]): TimelineEvent[] {
  const last = known.length ? known[known.length - 1].seq : 0;
  const fresh = incoming.filter((e) => e.seq > last).sort((a, b) => a.seq - b.seq);
  const all = fresh.length ? [...known, ...fresh] : [...known];
  return all.length > MAX_EVENTS ? all.slice(-MAX_EVENTS) : all;
}

/** The view's model: lanes, marks and stop spans; `now` ends the pauses that are still on. */
export function timelineModel(events: readonly TimelineEvent[], now: number, title = "Ray Sleuth timeline"): TimelineModel {
  const sorted = [...events].sort((a, b) => a.time - b.time || a.seq - b.seq);
  const keys = new Set<string>();
  const placed: { key: string; e: TimelineEvent }[] = [];
  for (const e of sorted) {
    const targets = kindOf(e) === "hang" && laneKey(e) === "cluster" ? hangLanes(e) : [];
    for (const key of targets.length ? targets : [laneKey(e)]) {
      keys.add(key);
      placed.push({ key, e });
    }
  }
  const order = [...keys].sort(laneOrder);
  const index = new Map(order.map((k, i) => [k, i]));
  const lanes: TimelineLane[] = order.map((k) => ({ label: k, rank: k.startsWith("rank ") ? Number(k.slice(5)) : null }));
  const marks: TimelineMark[] = [];
  const spans: TimelineSpan[] = [];
  const open = new Map<number, TimelineSpan>();
  for (const { key, e } of placed) {
    const lane = index.get(key) ?? 0;
    if (e.name === STOPPED_EVENT) {
      const span = { lane, t0: e.time, t1: null, label: eventLabel(e) };
      open.set(lane, span);
      spans.push(span);
    } else if (e.name === RESUMED_EVENT) {
      const span = open.get(lane);
      if (span) {
        span.t1 = e.time;
        span.label = `${span.label}, ${eventLabel(e)}`;
        open.delete(lane);
      }
    } else {
      marks.push({ lane, t: e.time, kind: kindOf(e), label: eventLabel(e) });
    }
  }
  const shown = marks.length > MAX_MARKS ? marks.slice(-MAX_MARKS) : marks;
  const times = sorted.map((e) => e.time);
  const t0 = times.length ? times[0] : now - 60;
  const t1 = Math.max(times.length ? times[times.length - 1] : now, spans.some((s) => s.t1 === null) ? now : 0, t0 + 1);
  const count = (k: TimelineKind) => shown.filter((m) => m.kind === k).length;
  const ranks = lanes.filter((l) => l.rank !== null).length;
  return {
    view: "timeline",
    title,
    subtitle:
      `${counted(lanes.length, "lane")} (${counted(ranks, "rank")}) · ${counted(count("step"), "step")} · ${counted(count("crash"), "crash", "crashes")} · ` +
      `${counted(spans.length, "stop")} · ${counted(count("inspect"), "inspect point")} · ${counted(count("hang"), "suspected hang")}` +
      (marks.length > shown.length ? ` · the newest ${MAX_MARKS} of ${marks.length} marks` : ""),
    lanes,
    marks: shown,
    spans,
    t0,
    t1,
    empty: events.length ? null : "No events yet. Call raysleuth.event(name, **fields) in remote code (e.g. once per step); crashes, pauses, inspect() calls and suspected hangs show here too.",
  };
}
