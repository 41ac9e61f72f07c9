// The timeline view's model and the Perfetto export (issue 14) from events
// shaped as GET /v1/events sends them: one lane per rank, hangs on the ranks
// they name, pauses as spans; the Chrome trace-event JSON with a row per rank,
// steps and stops as slices. No broker, no window.
import * as assert from "assert";
import { TimelineEvent } from "../../../extension/broker/types";
import { MAX_MARKS, eventLabel, mergeEvents, timelineModel } from "../../../extension/views/timelineModel";
import { TRACE_PID, toChromeTrace } from "../../../extension/views/perfettoTrace";

let seq = 0;
function ev(time: number, name: string, rank: number | null, fields: Record<string, unknown> = {}, who: Partial<TimelineEvent> = {}): TimelineEvent {
  return { seq: ++seq, time, name, rank, worker: rank === null ? null : `w${rank}`, pid: rank === null ? null : 100 + rank, fields, ...who };
}

/** What the demo's four ranks leave: steps, rank 2's crash, inspect points, a pause of rank 0, a hang. */
function demoEvents(): TimelineEvent[] {
  seq = 0;
  const out: TimelineEvent[] = [];
  for (let step = 0; step < 3; step++) {
    for (const rank of [0, 1, 2, 3]) {
      out.push(ev(1000 + step + rank * 0.01, "step", rank, { step, loss: 0.5 }));
      out.push(ev(1000 + step + rank * 0.01 + 0.001, "inspect", rank, { name: "grad", step, entries: 1 }));
    }
  }
  out.push(ev(1002.5, "crash", 2, { crash: "c1", kind: "exception", error: "FloatingPointError" }));
  out.push(ev(1001.2, "stopped", 0, { path: "/x/demo.py", line: 57, reason: "breakpoint" }));
  out.push(ev(1001.9, "resumed", 0, { seconds: 0.7 }));
  out.push(ev(1003, "suspected hang", null, { job_id: "01", ranks_text: "1-3", since: 1001, samples: 3 }));
  return out;
}

describe("Timeline", () => {
  it("has one lane per rank, rank 0 first, and puts each kind of event on its rank's lane", () => {
    const m = timelineModel(demoEvents(), 1010);
    assert.deepStrictEqual(m.lanes.map((l) => l.label), ["rank 0", "rank 1", "rank 2", "rank 3"]);
    const count = (kind: string, lane?: number) => m.marks.filter((k) => k.kind === kind && (lane === undefined || k.lane === lane)).length;
    assert.strictEqual(count("step"), 12);
    assert.strictEqual(count("inspect"), 12);
    assert.strictEqual(count("crash", 2), 1);
    // The hang names ranks 1-3: a mark on each of their lanes, none on rank 0's, no lane of its own.
    assert.deepStrictEqual(m.marks.filter((k) => k.kind === "hang").map((k) => k.lane), [1, 2, 3]);
    assert.deepStrictEqual(m.spans.map((s) => [s.lane, s.t0, s.t1]), [[0, 1001.2, 1001.9]]);
    assert.match(m.spans[0].label, /stopped at demo\.py:57 \(breakpoint\), resumed after 0\.7 s/);
    assert.deepStrictEqual([m.t0, m.t1], [1000, 1003]);
    assert.match(m.subtitle, /^4 lanes \(4 ranks\) · 12 steps · 1 crash · 1 stop · 12 inspect points · 3 suspected hangs$/);
    assert.strictEqual(m.empty, null);
  });

  it("keeps a pause that is still on open until now, and gives workers without a rank their own lane", () => {
    seq = 0;
    const m = timelineModel([ev(5, "stopped", 1, { path: "a.py", line: 3 }), ev(6, "epoch", null, { n: 1 }, { pid: 42, worker: "wx" }), ev(7, "suspected hang", null, {})], 20);
    assert.deepStrictEqual(m.lanes.map((l) => l.label), ["rank 1", "pid 42", "cluster"]);
    assert.deepStrictEqual(m.spans.map((s) => [s.t0, s.t1]), [[5, null]]);
    assert.strictEqual(m.t1, 20);
    assert.deepStrictEqual(m.marks.map((k) => [k.lane, k.kind]), [[1, "other"], [2, "hang"]]);
  });

  it("says what each event is in a line", () => {
    seq = 0;
    assert.strictEqual(eventLabel(ev(1, "step", 0, { step: 12, loss: 0.123456 })), "step 12 · loss=0.1235");
    assert.strictEqual(eventLabel(ev(1, "crash", 2, { kind: "oom", error: "OutOfMemoryError" })), "crash (oom): OutOfMemoryError");
    assert.strictEqual(eventLabel(ev(1, "inspect", 2, { name: "grad", step: 3, entries: 1 })), "inspect grad at step 3 (1 entries)");
    assert.strictEqual(eventLabel(ev(1, "eval", 0, {})), "eval");
  });

  it("says what to do when there are no events yet", () => {
    assert.match(timelineModel([], 100).empty ?? "", /raysleuth\.event/);
  });

  it("keeps the newest marks of a long run", () => {
    seq = 0;
    const many = Array.from({ length: MAX_MARKS + 10 }, (_, i) => ev(i, "step", 0, { step: i }));
    const m = timelineModel(many, 0);
    assert.strictEqual(m.marks.length, MAX_MARKS);
    assert.strictEqual(m.marks[0].t, 10);
    assert.match(m.subtitle, /the newest 20000 of 20010 marks/);
  });

  it("adds only events it has not seen (by seq)", () => {
    const all = demoEvents();
    const first = mergeEvents([], all.slice(0, 5));
    const next = mergeEvents(first, all.slice(3, 9));
    assert.deepStrictEqual(next.map((e) => e.seq), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
});

describe("Perfetto export", () => {
  it("writes a thread row per rank, named, sorted by rank", () => {
    const trace = toChromeTrace(demoEvents(), "test");
    const names = trace.traceEvents.filter((e) => e.ph === "M" && e.name === "thread_name").map((e) => [e.tid, e.args?.name]);
    assert.deepStrictEqual(names, [[0, "rank 0"], [1, "rank 1"], [2, "rank 2"], [3, "rank 3"]]);
    assert.ok(trace.traceEvents.every((e) => e.pid === TRACE_PID));
    assert.strictEqual(trace.displayTimeUnit, "ms");
    assert.deepStrictEqual(trace.otherData, { source: "test", events: demoEvents().length });
    assert.doesNotThrow(() => JSON.parse(JSON.stringify(trace)));
  });

  it("makes each step a slice from the rank's previous step, in microseconds", () => {
    const trace = toChromeTrace(demoEvents());
    const steps = trace.traceEvents.filter((e) => e.cat === "step" && e.tid === 1);
    assert.deepStrictEqual(steps.map((e) => [e.ph, e.name]), [["i", "step 0"], ["X", "step 1"], ["X", "step 2"]]);
    assert.strictEqual(steps[1].ts, 1000.01e6);
    assert.strictEqual(steps[1].dur, 1e6);
    assert.strictEqual(steps[1].args?.loss, 0.5);
  });

  it("makes a pause a slice, a crash and an inspect point instants, and a hang an instant on each rank it names", () => {
    const trace = toChromeTrace(demoEvents());
    const stop = trace.traceEvents.find((e) => e.cat === "stop");
    assert.deepStrictEqual(stop && [stop.ph, stop.tid, stop.ts, stop.dur], ["X", 0, 1001.2e6, 0.7e6]);
    const crash = trace.traceEvents.find((e) => e.cat === "crash");
    assert.deepStrictEqual(crash && [crash.ph, crash.s, crash.tid, crash.name], ["i", "t", 2, "crash (exception): FloatingPointError"]);
    assert.strictEqual(trace.traceEvents.filter((e) => e.cat === "inspect").length, 12);
    const hang = trace.traceEvents.filter((e) => e.cat === "suspected hang");
    assert.deepStrictEqual(hang.map((e) => [e.ph, e.s]), [["i", "g"]]);
    const timed = trace.traceEvents.filter((e) => e.ph !== "M").map((e) => e.ts ?? 0);
    assert.deepStrictEqual(timed, [...timed].sort((a, b) => a - b), "events in time order");
  });

  it("marks a pause still on as an instant where it began", () => {
    seq = 0;
    const trace = toChromeTrace([ev(5, "stopped", 1, { path: "a.py", line: 3 })]);
    const e = trace.traceEvents.find((x) => x.cat === "stop");
    assert.deepStrictEqual(e && [e.ph, e.ts, e.name], ["i", 5e6, "stopped at a.py:3 (still stopped)"]);
  });
});
