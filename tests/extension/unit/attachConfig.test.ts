// The debug configuration's pure parts on made-up workers: quick-pick rows,
// which worker a config means, path mappings, the DAP address. No broker.
import * as assert from "assert";
import { WorkerInfo } from "../../../extension/broker/types";
import { mergePathMappings, parseDapAddress, sessionKey, targetWorker } from "../../../extension/debug/attachConfig";
import { workerPickItems } from "../../../extension/cluster/workerGrouping";
import { makeWorker } from "./workerFixture";

let nextPid = 4000;
function worker(over: Partial<WorkerInfo>): WorkerInfo {
  const pid = over.pid ?? nextPid++;
  return makeWorker({ id: `w${pid}`, pid, node_id: "aaaa1111", actor_class: "Learner", world_size: 4, ...over });
}

describe("Attach configuration", () => {
  it('labels pick rows "rank 2 · Learner · pid 4242" with the state, paused first, and leaves out what cannot be attached', () => {
    const items = workerPickItems([
      worker({ rank: 3, pid: 4243 }),
      worker({ rank: 2, pid: 4242, state: "paused", paused_at: { path: "/src/train.py", line: 42, reason: "breakpoint" } }),
      worker({ rank: 1, pid: 4241, state: "exited" }),
      worker({ rank: 0, pid: 4240, agent: false }),
      worker({ rank: 1, pid: 4244, state: "idle" }),
    ]);
    assert.deepStrictEqual(
      items.map((i) => [i.label, i.description, i.workerId]),
      [
        ["rank 2 · Learner · pid 4242", "paused at train.py:42", "w4242"],
        ["rank 1 · Learner · pid 4244", "idle", "w4244"],
        ["rank 3 · Learner · pid 4243", "running", "w4243"],
      ],
    );
    assert.match(items[0].detail, /node 10\.0\.0\.1 · job 01000000 · worker w4242/);
  });

  it("resolves a rank to the paused worker, else the one seen last, and not when two jobs share it", () => {
    const old = worker({ rank: 1, last_seen: 100 });
    const recent = worker({ rank: 1, last_seen: 200 });
    assert.strictEqual(targetWorker({ rank: 1 }, [old, recent]), recent);
    const paused = worker({ rank: 1, state: "paused", last_seen: 50 });
    assert.strictEqual(targetWorker({ rank: 1 }, [old, paused, recent]), paused);
    const otherJob = worker({ rank: 1, job_id: "02000000" });
    assert.strictEqual(targetWorker({ rank: 1 }, [old, otherJob]), undefined);
    assert.strictEqual(targetWorker({ rank: 1, job: "02000000" }, [old, otherJob]), otherJob);
    assert.strictEqual(targetWorker({ worker: old.id }, [old, recent]), old);
    assert.strictEqual(targetWorker({ rank: 7 }, [old]), undefined);
  });

  it("keys sessions by worker id when known, else by rank and job; the cluster session has no key", () => {
    assert.strictEqual(sessionKey({ worker: "abc" }), "worker:abc");
    assert.strictEqual(sessionKey({ rank: 2, __raySleuthWorker: "def" }), "worker:def");
    assert.strictEqual(sessionKey({ rank: 2, job: "01" }), "rank:2:01");
    assert.strictEqual(sessionKey({ cluster: true }), undefined);
  });

  it("puts the config's path mappings first, then raySleuth.pathMappings with ${workspaceFolder} filled in", () => {
    assert.deepStrictEqual(
      mergePathMappings(
        [{ localRoot: "/a", remoteRoot: "/b" }, { bogus: 1 }],
        [{ localRoot: "${workspaceFolder}/src", remoteRoot: "/app/src" }, { localRoot: "/a", remoteRoot: "/b" }],
        "/ws",
      ),
      [
        { localRoot: "/a", remoteRoot: "/b" },
        { localRoot: "/ws/src", remoteRoot: "/app/src" },
      ],
    );
    assert.deepStrictEqual(mergePathMappings(undefined, "not a list", undefined), []);
  });

  it("parses the broker's DAP address and names a bad one", () => {
    assert.deepStrictEqual(parseDapAddress("127.0.0.1:7312"), { host: "127.0.0.1", port: 7312 });
    assert.deepStrictEqual(parseDapAddress("[::1]:7312"), { host: "::1", port: 7312 });
    assert.throws(() => parseDapAddress("7312"), /The broker's DAP address "7312" is not HOST:PORT/);
    assert.throws(() => parseDapAddress("host:99999"), /not HOST:PORT/);
  });
});
