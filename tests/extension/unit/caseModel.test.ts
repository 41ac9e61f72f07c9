// The Cases view's rows and scenes (issue 26), on made-up cases (plain mocha).
import * as assert from "assert";
import type { CaseSummary } from "../../../extension/broker/types";
import { caseDescription, divergenceHtml, divergenceRows, sceneOf } from "../../../extension/views/caseModel";

function kase(over: Partial<CaseSummary>): CaseSummary {
  return { id: "c1", kind: "crash", time: 1_000, job_id: "01000000", ranks: [2], summary: "rank 2 raised X", hint: null, ...over };
}

describe("Cases", () => {
  it("opens each kind at its scene", () => {
    assert.deepStrictEqual(sceneOf(kase({}), { crash: "20261206-000000-00000001" }), { kind: "crash", crash: "20261206-000000-00000001" });
    assert.deepStrictEqual(sceneOf(kase({ kind: "hang" }), {}), { kind: "hang", job: "01000000" });
    assert.deepStrictEqual(sceneOf(kase({ kind: "divergence", id: "divergence-1" }), {}), { kind: "divergence", case: "divergence-1" });
    assert.deepStrictEqual(sceneOf(kase({ kind: "memory" }), { worker: "w1" }), { kind: "memory", worker: "w1" });
    assert.strictEqual(sceneOf(kase({}), {}), undefined, "a crash case without its record opens nothing");
  });

  it("says when, and lays out a divergence by rank with the differing rank marked", () => {
    assert.strictEqual(caseDescription(kase({}), 1_030_000), "crash · 30 s ago");
    const evidence = {
      expression: "grad", pass: 8, step: null, last_agreed_pass: 7, ranks: [2],
      values: { "0": { norm: 1, hash: "a" }, "2": { norm: 1.001, hash: "b" }, "1": { norm: 1, hash: "a" } },
    };
    assert.deepStrictEqual(divergenceRows(evidence).map((r) => [r.rank, r.differs]), [[0, false], [1, false], [2, true]]);
    const html = divergenceHtml("rank 2 diverged", evidence);
    assert.match(html, /grad at pass 8; all agreed at pass 7/);
    assert.match(html, /<tr><td class="differs"[^>]*>2<\/td>/);
    assert.match(html, /<th>norm<\/th><th>hash<\/th>/);
    // The narrow layout (the panel beside the code hides the table): one card per rank, rank 2's marked.
    assert.match(html, /<div class="cards"><div class="card"><h3>rank 0<\/h3>/);
    assert.match(html, /<h3>rank 2 · differs from the majority<\/h3><div class="differs" title="1.001"><span class="name">norm:<\/span> 1.001<\/div>/);
  });
});
