// The cross-rank tables of Evaluate and Capture Here on made-up results: which
// cells are marked as differing, row order, columns. No broker, no window.
import * as assert from "assert";
import { SnapshotRow } from "../../../extension/broker/types";
import { divergentCells, evaluateRows, snapshotTable } from "../../../extension/views/resultTables";
import { evaluateHtml, snapshotHtml } from "../../../extension/views/html";

describe("Cross-rank result tables", () => {
  it("marks the cells that are not the majority's value, none when all agree, all on a tie", () => {
    assert.deepStrictEqual(divergentCells(["1", "1", "7", "1"]), [false, false, true, false]);
    assert.deepStrictEqual(divergentCells(["1", "1", "1"]), [false, false, false]);
    assert.deepStrictEqual(divergentCells(["0", "200"]), [true, true]);
    assert.deepStrictEqual(divergentCells(["a", undefined, "a"]), [false, true, false]);
    assert.deepStrictEqual(divergentCells([]), []);
  });

  it("orders evaluate rows by rank and marks a diverging value and an error", () => {
    const rows = evaluateRows([
      { rank: 2, worker: "w2", value: "nan" },
      { rank: 0, worker: "w0", value: "0.5" },
      { rank: 3, worker: "w3", error: "NameError: name 'loss' is not defined" },
      { rank: 1, worker: "w1", value: "0.5" },
    ]);
    assert.deepStrictEqual(
      rows.map((r) => [r.rank, r.text, r.isError, r.differs]),
      [
        [0, "0.5", false, false],
        [1, "0.5", false, false],
        [2, "nan", false, true],
        [3, "NameError: name 'loss' is not defined", true, true],
      ],
    );
    const html = evaluateHtml("loss", rows);
    assert.strictEqual((html.match(/class="[^"]*differs/g) ?? []).length, 2, "two highlighted cells");
    assert.ok(!html.includes("<script"), "no script in the panel");
  });

  it("compares tensors on their hash, not their repr, and shows their statistics (issue 27)", () => {
    const t = (hash: string) => ({ name: "grad", shape: [1024], dtype: "float32", device: "cpu", numel: 1024, mean: 0.1, std: 0.7, min: -1, max: 1, norm: 22, nan: 0, inf: 0, hash });
    const same = "ndarray[1024] float32 norm=2.2e+01 nan=0";
    const rows = evaluateRows([
      { rank: 2, worker: "w2", value: same, summary: t("bbbbbbbbbbbb") },
      { rank: 0, worker: "w0", value: same, summary: t("aaaaaaaaaaaa") },
      { rank: 1, worker: "w1", value: same, summary: t("aaaaaaaaaaaa") },
    ]);
    assert.deepStrictEqual(rows.map((r) => [r.rank, r.differs]), [[0, false], [1, false], [2, true]]);
    assert.match(rows[2].text, /^Tensor\[1024\] float32 cpu norm=2\.2e\+01 mean=1\.0e-01 std=0\.7 hash=bbbbbbbb$/);
  });

  it("builds rank × local variable over the innermost frame, rows by rank then time", () => {
    const row = (rank: number, time: number, locals: Record<string, string>): SnapshotRow => ({
      rank,
      worker: `w${rank}`,
      time,
      frames: [
        { path: "/src/bp_job.py", line: 29, function: "run", locals },
        { path: "/src/bp_job.py", line: 40, function: "main", locals: { outer: "1" } },
      ],
    });
    const table = snapshotTable([
      row(2, 5, { steps: "5", total: "1010" }),
      row(0, 9, { steps: "5", total: "10", extra: "x" }),
      row(0, 4, { steps: "5", total: "10" }),
      row(3, 1, { steps: "5", total: "10" }),
    ]);
    assert.deepStrictEqual(table.columns, ["steps", "total", "extra"], "the innermost frame's locals only");
    assert.deepStrictEqual(table.rows.map((r) => [r.rank, r.time]), [[0, 4], [0, 9], [2, 5], [3, 1]]);
    assert.deepStrictEqual(table.rows.map((r) => r.cells), [["5", "10", undefined], ["5", "10", "x"], ["5", "1010", undefined], ["5", "10", undefined]]);
    assert.deepStrictEqual(table.rows.map((r) => r.differs), [[false, false, false], [false, false, true], [false, true, false], [false, false, false]]);
    assert.strictEqual(table.rows[0].where, "run (bp_job.py:29)");
  });

  it("does not flag `self` because object addresses differ between processes (issue #13, item 7)", () => {
    const self = (addr: string) => `<bp_job.Worker object at 0x${addr}>`;
    assert.deepStrictEqual(divergentCells([self("7f3a10"), self("7f9b22"), self("7c0001")]), [false, false, false]);
    assert.deepStrictEqual(divergentCells([self("7f3a10"), "<bp_job.Other object at 0x7f3a10>", self("7c0001")]), [false, true, false]);
  });

  it("keeps a one-shot capture at one row per worker, and says so", () => {
    const row = (worker: string, time: number): SnapshotRow => ({ rank: 0, worker, time, frames: [{ path: "/src/a.py", line: 3, function: "f", locals: { x: String(time) } }] });
    const table = snapshotTable([row("w0", 2), row("w0", 1), row("w1", 3)], 1);
    assert.deepStrictEqual(table.rows.map((r) => [r.worker, r.time]), [["w0", 1], ["w1", 3]], "the first capture of each worker");
    const html = snapshotHtml("Snapshot a.py:3", table, "One-shot: each worker captures once");
    assert.match(html, /One-shot: each worker captures once/);
  });

  it("lays a snapshot out as cards in a narrow editor", () => {
    const rows: SnapshotRow[] = [0, 1].map((rank) => ({
      rank,
      worker: `w${rank}`,
      time: 1,
      frames: [{ path: "/src/a.py", line: 3, function: "f", locals: { a_long_variable_name: "x".repeat(80), step: String(rank) } }],
    }));
    const html = snapshotHtml("Snapshot a.py:3", snapshotTable(rows));
    assert.match(html, /@media \(max-width: 640px\) \{ \.wide \{ display: none; \} \.cards \{ display: block; \} \}/);
    // A half-width table scrolls; its headers never break letter by letter ("r a n k", issue 25).
    assert.match(html, /th \{ [^}]*white-space: nowrap; overflow-wrap: normal; \}/);
    assert.strictEqual((html.match(/<div class="card">/g) ?? []).length, 2, "one card per capture");
    assert.match(html, /<h3>rank 1 · [^<]* · f \(a\.py:3\)<\/h3>/);
    assert.match(html, /<div class="differs" title="1"><span class="name">step:<\/span> 1<\/div>|<div class="differs" title="0">/);
  });
});
