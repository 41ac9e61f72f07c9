// The Collectives view's shaping (issue 27) of GET /v1/collectives rows: one node per process
// group saying who is behind, one row per rank with its sequence numbers. No broker, no window.
import * as assert from "assert";
import { CollectiveRow, collectiveItems } from "../../../extension/views/collectivesModel";

function row(group: string, rank: number, enq: number, started: number, done: number, behind = false): CollectiveRow {
  return { group, rank, worker: `w${rank}`, last_enqueued: enq, last_started: started, last_completed: done, op: "gloo:all_reduce", state: "started", behind };
}

describe("Collectives view model", () => {
  it("groups the ranks per process group and marks the one behind", () => {
    const items = collectiveItems([row("0", 0, 119, 119, 118), row("0", 1, 119, 119, 118), row("0", 3, 118, 118, 118, true), row("1", 0, 4, 4, 4)]);
    assert.deepStrictEqual(items.map((i) => [i.label, i.behind]), [["process group 0", true], ["process group 1", false]]);
    assert.match(items[0].description, /^3 ranks · rank 3 behind$/);
    assert.strictEqual(items[1].description, "1 rank · in step");
    const late = items[0].children[2];
    assert.strictEqual(late.label, "rank 3 · behind");
    assert.strictEqual(late.description, "enqueued #118 · started #118 · completed #118 · gloo:all_reduce");
    assert.match(late.tooltip, /The others wait for it/);
  });

  it("writes a missing sequence number as a dash", () => {
    const [g] = collectiveItems([{ ...row("0", 0, 3, -1, -1), last_started: null }]);
    assert.match(g.children[0].description, /started - · completed -/);
  });

  it("has nothing to show for no rows", () => {
    assert.deepStrictEqual(collectiveItems([]), []);
  });
});
