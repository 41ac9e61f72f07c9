// The Cluster view's shaping logic on made-up data: no broker, no window
// (plain mocha).
import * as assert from "assert";
import { WorkerInfo } from "../../../extension/broker/types";
import { formatCountdown, groupWorkers, nodeDescription, shownState, workerDescription, workerLabel, workerTooltip } from "../../../extension/cluster/workerGrouping";
import { statusText } from "../../../extension/cluster/statusText";
import { makeWorker } from "./workerFixture";

let nextPid = 100;
function worker(over: Partial<WorkerInfo>): WorkerInfo {
  const pid = over.pid ?? nextPid++;
  return makeWorker({ id: `w${pid}`, pid, node_id: "aaaa1111", actor_class: null, ...over });
}

describe("Worker tree grouping", () => {
  it("groups by node, then actor class, with plain workers under tasks / idle, the exited ones last, ranks in order", () => {
    const tree = groupWorkers(
      [
        worker({ actor_class: "Learner", rank: 3, pid: 40 }),
        worker({ actor_class: "Learner", rank: 1, pid: 41 }),
        worker({ state: "idle", pid: 42 }),
        worker({ task: "prefetch", pid: 43 }),
        worker({ actor_class: "Learner", rank: 2, pid: 44, node_id: "bbbb2222", node_ip: "10.0.0.2" }),
        worker({ actor_class: "Actor", pid: 45 }),
        worker({ actor_class: "Learner", rank: 0, pid: 46, state: "exited" }),
        worker({ task: "prefetch", pid: 47, state: "exited" }),
      ],
      [
        { node_id: "aaaa1111", node_ip: "10.0.0.1", alive: true, workers: 5 },
        { node_id: "bbbb2222", node_ip: "10.0.0.2", alive: true, workers: 1 },
        { node_id: "cccc3333", node_ip: "10.0.0.3", alive: false, workers: 0 },
      ],
    );
    assert.deepStrictEqual(
      tree.map((n) => [n.nodeIp, n.workerCount, n.groups.map((g) => [g.name, g.workers.map((w) => w.pid)])]),
      [
        ["10.0.0.1", 5, [["Actor", [45]], ["Learner", [41, 40]], ["tasks", [43]], ["idle", [42]], ["exited", [46, 47]]]],
        ["10.0.0.2", 1, [["Learner", [44]]]],
        ["10.0.0.3", 0, []],
      ],
    );
    assert.deepStrictEqual(tree.map(nodeDescription), ["5 workers · 2 exited", "1 worker", "0 workers · dead"]);
  });

  it('labels a worker "rank 2 · Learner · pid 4242" and leaves out what is unknown', () => {
    assert.strictEqual(workerLabel(worker({ rank: 2, actor_class: "Learner", pid: 4242 })), "rank 2 · Learner · pid 4242");
    assert.strictEqual(workerLabel(worker({ task: "prefetch", pid: 7 })), "prefetch · pid 7");
    assert.strictEqual(workerLabel(worker({ pid: 8 })), "pid 8");
    assert.strictEqual(workerLabel(worker({ rank: 0, pid: 9 })), "rank 0 · pid 9");
  });

  it("describes the state, where a worker is paused, workers without an agent, and GPU memory", () => {
    assert.strictEqual(workerDescription(worker({ state: "running" })), "running");
    assert.strictEqual(
      workerDescription(worker({ state: "paused", paused_at: { path: "/src/train.py", line: 42, reason: "breakpoint" } })),
      "paused at train.py:42",
    );
    assert.strictEqual(workerDescription(worker({ state: "idle", agent: false })), "idle (no agent)");
    assert.strictEqual(workerDescription(worker({ state: "crashed" })), "crashed");
    const gib = 1024 ** 3;
    assert.strictEqual(
      workerDescription(worker({ state: "running", gpu_memory: { used_bytes: 3.5 * gib, peak_bytes: 4 * gib, growing: true } })),
      "running · GPU 3.5 GiB ↑",
    );
    assert.strictEqual(workerDescription(worker({ state: "idle", gpu_memory: { used_bytes: 512 * 1024 ** 2, peak_bytes: gib, growing: false } })), "idle · GPU 512 MiB");
    assert.strictEqual(workerDescription(worker({ state: "exited", gpu_memory: { used_bytes: gib, peak_bytes: gib, growing: false } })), "exited");
  });

  it("puts every known field in the tooltip", () => {
    const gpu_memory = { used_bytes: 3 * 1024 ** 3, peak_bytes: 5.25 * 1024 ** 3, growing: true };
    const tip = workerTooltip(worker({ pid: 5, rank: 1, world_size: 4, gpu_ids: [0, 1], actor_class: "Learner", agent: false, gpu_memory }));
    const lines = ["worker: w5", "pid: 5", "rank: 1", "world size: 4", "GPUs: 0, 1", "GPU memory: 3.0 GiB (peak 5.3 GiB, growing)"];
    for (const line of [...lines, "actor class: Learner", "node: 10.0.0.1 (aaaa1111)", "python: 3.12.4"]) {
      assert.ok(tip.split("\n").includes(line), `${line} in\n${tip}`);
    }
    assert.match(tip, /^agent: no/m);
  });

  it("shows no running or idle worker while the broker cannot be reached (issue #13, item 5)", () => {
    const stale = { stale: true };
    assert.strictEqual(shownState(worker({ state: "running" }), stale), "unknown");
    assert.strictEqual(shownState(worker({ state: "exited" }), stale), "exited", "gone stays gone");
    assert.strictEqual(workerDescription(worker({ state: "idle" }), stale), "unknown: broker unreachable (was idle)");
    assert.match(workerTooltip(worker({ state: "running" }), stale), /^state: unknown: the broker cannot be reached \(last known: running\)$/m);
    assert.strictEqual(workerDescription(worker({ state: "running" }), { stale: false }), "running");
  });

  it("counts down to the timeout that ends a pause, and names the setting to raise", () => {
    const now = 1_700_000_000_000;
    const deadline = {
      at: now / 1000 + 581.4,
      what: "Ray Train's worker health check",
      seconds: 600,
      setting: "RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S (runtime_env env_vars)",
    };
    const paused = worker({ state: "paused", paused_at: { path: "/src/train.py", line: 42, reason: "breakpoint" }, deadline });
    assert.strictEqual(workerDescription(paused, { now }), "paused at train.py:42 · health check kills it in 9:41");
    assert.strictEqual(workerDescription(paused, { now: now + 600_000 }), "paused at train.py:42 · health check ran out");
    const tip = workerTooltip(paused, { now });
    assert.match(tip, /^deadline: Ray Train's worker health check ends this pause at .* \(health check kills it in 9:41\); to pause longer, raise RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S \(runtime_env env_vars\) \(now 600 s\)$/m);
    assert.strictEqual(workerDescription(worker({ state: "running", deadline }), { now }), "running", "only a paused worker counts down");
    assert.deepStrictEqual([formatCountdown(5.9), formatCountdown(-3), formatCountdown(3723)], ["0:05", "0:00", "1:02:03"]);
  });

  it("explains a worker without an agent", () => {
    assert.match(workerTooltip(worker({ agent: false, state: "idle" })), /^agent: no: Ray lists this worker, but no Ray Sleuth agent runs in it .*RAYSLEUTH=1/m);
    // An exited worker had an agent or not: it cannot be debugged either way (issue 25, item 8).
    assert.doesNotMatch(workerTooltip(worker({ agent: false, state: "exited" })), /^agent:/m);
    assert.strictEqual(workerDescription(worker({ state: "exited", agent: false })), "exited");
  });

  it("writes the status bar text", () => {
    assert.strictEqual(statusText({ status: "connected", workers: [worker({}), worker({})] }), "Ray: 2 workers");
    assert.strictEqual(statusText({ status: "connected", workers: [worker({})] }), "Ray: 1 worker");
    assert.strictEqual(statusText({ status: "connected", workers: [worker({}), worker({ state: "exited" })] }), "Ray: 1 worker", "exited workers are not counted");
    assert.strictEqual(statusText({ status: "disconnected", workers: [] }), "Ray: disconnected");
    // A broker that went away: "reconnecting…" for a while, then said plainly (issue 25, item 5).
    const lostSince = 1_000_000;
    assert.strictEqual(statusText({ status: "reconnecting", workers: [], lostSince }, lostSince + 3_000), "Ray: reconnecting…");
    assert.strictEqual(statusText({ status: "reconnecting", workers: [], lostSince }, lostSince + 15_000), "Ray: broker unreachable, retrying");
  });
});
