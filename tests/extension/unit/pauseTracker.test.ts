// raySleuth.autoAttach's choice of pauses (issue #13, items 2, 3 and 6): each
// pause once, a repeat pause at the same line again, never a held crash, lowest
// rank first. Plain mocha on made-up workers.
import * as assert from "assert";
import { WorkerInfo } from "../../../extension/broker/types";
import { isHeldCrash, pauseKey, PauseTracker } from "../../../extension/debug/pauseTracker";
import { makeWorker } from "./workerFixture";

function worker(over: Partial<WorkerInfo>): WorkerInfo {
  return makeWorker({ actor_class: "Trainer", rank: 0, ...over });
}

const AT = { path: "/app/train.py", line: 42, reason: "breakpoint" };
const none = () => false;

describe("Auto-attach's pauses (PauseTracker)", () => {
  it("opens a repeat pause at the same line once it was over (the broker's paused_since differs)", () => {
    const t = new PauseTracker();
    assert.deepStrictEqual(t.take([worker({ state: "paused", paused_at: AT, paused_since: 100 })], none, true).map((w) => w.id), ["w0"]);
    assert.deepStrictEqual(t.take([worker({ state: "paused", paused_at: AT, paused_since: 100 })], none, true), [], "the same pause: once");
    // Continued and paused at the same line again before the editor saw it run.
    assert.deepStrictEqual(t.take([worker({ state: "paused", paused_at: AT, paused_since: 130 })], none, true).map((w) => w.id), ["w0"]);
  });

  it("opens a repeat pause at the same line from a broker without paused_since, once the worker ran in between", () => {
    const t = new PauseTracker();
    assert.strictEqual(t.take([worker({ state: "paused", paused_at: AT })], none, true).length, 1);
    assert.strictEqual(t.take([worker({ state: "running" })], none, true).length, 0);
    assert.strictEqual(t.take([worker({ state: "paused", paused_at: AT })], none, true).length, 1);
  });

  it("opens a repeat pause that the broker shows under the same paused_since, once its place went unknown in between", () => {
    // Seen in the extension test: the session closed, the broker let the worker run, Ray's late
    // State API sample kept it "paused" (no place), then it stopped at the line again.
    const t = new PauseTracker();
    assert.strictEqual(t.take([worker({ state: "paused", paused_at: AT, paused_since: 100 })], none, true).length, 1);
    assert.strictEqual(t.take([worker({ state: "paused", paused_at: null, paused_since: 100 })], none, true).length, 0, "the stale tail: nothing to open");
    assert.strictEqual(t.take([worker({ state: "paused", paused_at: AT, paused_since: 100 })], none, true).length, 1);
  });

  it("never reopens a pause whose session was closed", () => {
    const t = new PauseTracker();
    const paused = worker({ state: "paused", paused_at: AT, paused_since: 100 });
    assert.strictEqual(t.take([paused], () => true, true).length, 0, "a session is open: nothing to open");
    assert.strictEqual(t.take([paused], none, true).length, 0, "closed: still the same pause");
  });

  it("leaves a crash held for Inspect alone, also once Inspect's session holds it stopped", () => {
    const t = new PauseTracker();
    const held = worker({ state: "crashed", paused_at: { ...AT, reason: "exception" }, crash: "c1", held_until: 2e9 });
    assert.strictEqual(t.take([held], none, true).length, 0);
    // Inspect attached: the broker lists the worker paused at the raise line.
    const stopped = { ...held, state: "paused" as const, paused_since: 100 };
    assert.ok(isHeldCrash(stopped));
    assert.strictEqual(t.take([stopped], none, true).length, 0);
    // The hold ran out, nobody attached: Ray's State API still counts the thread as paused for a
    // few seconds (no place known), then the worker runs on. Nothing opens.
    assert.strictEqual(t.take([worker({ state: "paused", paused_at: null, crash: "c1" })], none, true, 2e9 + 3).length, 0);
    assert.strictEqual(t.take([worker({ state: "running", crash: "c1" })], none, true, 2e9 + 5).length, 0);
    // Long after: a pause of Ray's own breakpoint() (no place either) is a pause again.
    assert.strictEqual(t.take([worker({ state: "paused", paused_at: null, crash: "c1" })], none, true, 2e9 + 60).length, 1);
    assert.ok(!isHeldCrash(worker({ state: "paused", paused_at: AT, crash: "c1" })), "a breakpoint pause of a worker that crashed once is a pause");
  });

  it("opens simultaneous pauses lowest rank first, and nothing while the setting is off", () => {
    const ws = [3, 0, 2].map((r) => worker({ id: `w${r}`, pid: 100 + r, rank: r, state: "paused", paused_at: AT, paused_since: 10 }));
    assert.deepStrictEqual(new PauseTracker().take(ws, none, false), []);
    assert.deepStrictEqual(new PauseTracker().take(ws, none, true).map((w) => w.rank), [0, 2, 3]);
  });

  it("keys a pause by worker and paused_since", () => {
    assert.notStrictEqual(pauseKey(worker({ paused_since: 1 })), pauseKey(worker({ paused_since: 2 })));
    assert.notStrictEqual(pauseKey(worker({ id: "a", paused_since: 1 })), pauseKey(worker({ id: "b", paused_since: 1 })));
  });
});
