// The Parallel Stacks view's items (issue 27), on a made-up tree (plain mocha).
import * as assert from "assert";
import type { ParallelStackNode } from "../../../extension/broker/types";
import { parallelItems, rootsOf, whoText } from "../../../extension/views/parallelTree";
import { makeWorker } from "./workerFixture";

function node(fn: string, line: number, ranks: number[], children: ParallelStackNode[] = []): ParallelStackNode {
  return { function: fn, path: `/home/u/train.py`, line, ranks, workers: ranks.map((r) => `w${r}`), branch: children.length > 1, children };
}

describe("Parallel stacks", () => {
  const tree = { ...node("main_loop", 290, [0, 1, 2, 3], [node("fit", 120, [0, 1, 2], [node("all_reduce_grads", 88, [0, 1, 2])]), node("fit", 118, [3])]), job_id: "01000000" };

  it("labels each frame with its place and ranks, and marks where they part", () => {
    const [root] = parallelItems(rootsOf({ time: 0, elapsed_ms: 0, workers: [], groups: [], collectives: [], behind: [], text: "", tree: [tree] }));
    assert.strictEqual(root.label, "job 01000000 · main_loop");
    assert.strictEqual(root.description, "train.py:290 · ranks 0-3 (4) · ranks part here");
    assert.deepStrictEqual(root.children.map((c) => c.description), ["train.py:120 · ranks 0-2 (3)", "train.py:118 · rank 3 (1)"]);
    assert.strictEqual(root.children[0].children[0].label, "all_reduce_grads");
    assert.strictEqual(whoText(node("x", 1, [])), "no rank (0)");
  });

  it("lists each rank's state in a node's hover", () => {
    const workers = [makeWorker({ id: "w3", rank: 3, state: "paused" })];
    const [root] = parallelItems([tree], workers);
    assert.match(root.children[1].tooltip, /rank 3: paused/);
  });

  it("shows the library frames the broker folded: a user frame's way in, a leaf of them (issue #38)", () => {
    const deco = { function: "inner", path: "/venv/lib/python3.11/site-packages/verl/single_controller/base/decorator.py", line: 431, code: null, library: true };
    const wait = { function: "wait", path: "/usr/lib/python3.11/threading.py", line: 331, code: null, library: true };
    const leaf: ParallelStackNode = { ...node("wait", 331, [0, 2]), path: wait.path, library: true, frames: [wait, wait] };
    const helper: ParallelStackNode = { ...node("helper", 22, [0, 2], [leaf]), via: [deco] };
    const root: ParallelStackNode = { ...node("init_model", 40, [0, 2], [helper]), via: [deco, deco, deco] };
    const [item] = parallelItems([root]);
    assert.strictEqual(item.description, "train.py:40 · ranks 0,2 (2) · via 3 library frames");
    assert.strictEqual(item.children[0].description, "train.py:22 · ranks 0,2 (2) · via 1 library frame");
    assert.match(item.children[0].tooltip, /via:\n {2}inner \(\/venv\/lib\/python3\.11\/site-packages\/verl\/single_controller\/base\/decorator\.py:431\)/);
    assert.strictEqual(item.children[0].children[0].description, "threading.py:331 · ranks 0,2 (2) · 2 library frames");
    assert.match(item.children[0].children[0].tooltip, /library frames:\n {2}wait/);
  });

  it("takes one root, a list of roots, or none", () => {
    const base = { time: 0, elapsed_ms: 0, workers: [], groups: [], collectives: [], behind: [], text: "" };
    assert.strictEqual(rootsOf({ ...base, tree }).length, 1);
    assert.strictEqual(rootsOf({ ...base, tree: null }).length, 0);
    assert.strictEqual(rootsOf(base).length, 0);
  });
});
