// The scope-prefix editing of breakpoint conditions and the texts shown next to
// a cluster breakpoint, on plain strings. No broker, no window (plain mocha).
import * as assert from "assert";
import { WorkerInfo } from "../../../extension/broker/types";
import { liveRanks, rankDescription } from "../../../extension/cluster/workerGrouping";
import { formatRanks, parseRanks } from "../../../extension/common/ranks";
import { rankScopeOf, setRankScope, splitCondition } from "../../../extension/breakpoints/rankScope";
import { breakpointLineText, scopeLabel } from "../../../extension/breakpoints/annotations";
import { logpointText } from "../../../extension/breakpoints/logpointText";
import { makeWorker } from "./workerFixture";

describe("Rank scope prefixes", () => {
  it("writes [rank 0,2] in front of a plain condition and creates a condition when there was none", () => {
    assert.strictEqual(setRankScope("step % 100 == 0", [2, 0]), "[rank 0,2] step % 100 == 0");
    assert.strictEqual(setRankScope(undefined, [1]), "[rank 1]");
    assert.strictEqual(setRankScope("", [0, 1, 2, 3, 5]), "[rank 0-3,5]");
  });

  it("replaces an existing rank scope, whatever its spelling, and keeps node and actor scopes", () => {
    assert.strictEqual(setRankScope("[rank 0] loss > 1", [3]), "[rank 3] loss > 1");
    assert.strictEqual(setRankScope("  [ranks 1-2][node 3f2a] x", [0]), "[rank 0] [node 3f2a] x");
    assert.strictEqual(setRankScope("[node 3f2a] [RANK 4] [actor Learner] a and b", [5, 6]), "[rank 5-6] [node 3f2a] [actor Learner] a and b");
  });

  it("picking no rank removes the rank scope, and a breakpoint with nothing left has no condition", () => {
    assert.strictEqual(setRankScope("[rank 0,2-3] step % 100 == 0", []), "step % 100 == 0");
    assert.strictEqual(setRankScope("[rank 1]", []), undefined);
    assert.strictEqual(setRankScope("[rank 1] [actor Learner]", []), "[actor Learner]");
    assert.strictEqual(setRankScope(undefined, []), undefined);
  });

  it("leaves Python that starts with a bracket alone", () => {
    assert.deepStrictEqual(splitCondition("[x for x in xs] == []"), { scopes: [], rest: "[x for x in xs] == []" });
    assert.strictEqual(setRankScope("[x for x in xs] == []", [1]), "[rank 1] [x for x in xs] == []");
  });

  it("reads the ranks a condition is scoped to (several rank scopes intersect)", () => {
    assert.deepStrictEqual(rankScopeOf("[rank 0,2-3] step > 1"), [0, 2, 3]);
    assert.deepStrictEqual(rankScopeOf("[rank 0-3] [rank 2-5]"), [2, 3]);
    assert.strictEqual(rankScopeOf("[node 3f2a] x"), undefined);
    assert.strictEqual(rankScopeOf(undefined), undefined);
  });

  it("parses and formats rank lists like the broker", () => {
    assert.deepStrictEqual(parseRanks("0, 2-3,7"), [0, 2, 3, 7]);
    assert.strictEqual(parseRanks("a"), undefined);
    assert.strictEqual(parseRanks("3-1"), undefined);
    assert.strictEqual(parseRanks(""), undefined);
    assert.strictEqual(formatRanks([3, 0, 2, 2, 9, 10, 11]), "0,2-3,9-11");
  });

  it('shows "⟵ ranks 0,2 · armed on 2" after a scoped breakpoint, "all workers" without a scope', () => {
    assert.strictEqual(breakpointLineText({ scope: "rank 0,2", armed: 2 }), "  ⟵ ranks 0,2 · armed on 2");
    assert.strictEqual(breakpointLineText({ scope: "rank 1", armed: 0 }), "  ⟵ rank 1 · armed on 0");
    assert.strictEqual(breakpointLineText({ scope: null, armed: 4 }), "  ⟵ all workers · armed on 4");
    assert.strictEqual(scopeLabel("rank 0-3; actor Learner"), "ranks 0-3 · actor Learner");
    assert.strictEqual(scopeLabel("node 10.0.0.1,10.0.0.2"), "nodes 10.0.0.1,10.0.0.2");
  });

  it("prefixes logpoint lines with the rank, or the worker id when there is no rank", () => {
    assert.strictEqual(logpointText({ rank: 3, worker: "abcdef0123456789", message: "loss=0.5" }), "[rank 3] loss=0.5");
    assert.strictEqual(logpointText({ rank: null, worker: "abcdef0123456789", message: "hi" }), "[worker abcdef01] hi");
    assert.strictEqual(logpointText({ rank: 0, worker: "w", message: "NameError: loss", error: true }), "[rank 0] logpoint failed: NameError: loss");
  });

  it("lists the live ranks once each, with their workers, for the rank pickers", () => {
    const w = (rank: number | null, pid: number, over: Partial<WorkerInfo> = {}): WorkerInfo =>
      makeWorker({ id: `w${pid}`, pid, node_id: "n", node_ip: "127.0.0.1", job_id: "01", actor_class: "Trainer", rank, world_size: 4, python: "3.11", last_seen: 0, ...over });
    const ranks = liveRanks([w(2, 12), w(0, 10), w(null, 11), w(2, 13, { actor_class: "RankWorker", state: "paused" }), w(1, 14, { state: "exited" })]);
    assert.deepStrictEqual(ranks.map((r) => [r.rank, r.workers.map((x) => x.pid)]), [[0, [10]], [2, [12, 13]]]);
    assert.strictEqual(rankDescription(ranks[1]), "Trainer, RankWorker · 2 workers · 1 paused");
  });
});
