// The cross-rank tensor tables (issue 14) on rows shaped as the broker sends
// them: GET /v1/inspect's flagged rows and a snapshot point's flagged values
// (Compare Across Ranks). Which ranks are flagged, which cells are marked, the
// numbers as printed, and the HTML. No broker, no window.
import * as assert from "assert";
import { InspectRow, SnapshotRow, TensorSummary } from "../../../extension/broker/types";
import { inspectQueryString } from "../../../extension/broker/telemetryClient";
import {
  STAT_COLUMNS,
  capturedWorkers,
  compareGroups,
  formatNumber,
  groupVerdict,
  inspectGroups,
  inspectNames,
  markedColumns,
  newestCompleteStep,
  summaryText,
} from "../../../extension/views/tensorTable";
import { tensorGroupHtml, tensorPageHtml } from "../../../extension/views/tensorHtml";
import { snapshotHtml } from "../../../extension/views/html";
import { snapshotTable } from "../../../extension/views/resultTables";

const HASH = "9f2c4e6a8b0d1f3e5a7c9e1b";

function stats(extra: Partial<TensorSummary> = {}): TensorSummary {
  return { name: "grad", shape: [1024], dtype: "float32", device: "cpu", numel: 1024, mean: 0.0123, std: 0.70712, min: -1, max: 1, norm: 22.6274, nan: 0, inf: 0, hash: HASH, differs: false, why: null, ...extra };
}

/** Four ranks' rows of inspect("grad", t, step) where rank 2's tensor is off by 1e-3 in one element. */
function inspectRows(step: number): InspectRow[] {
  return [0, 1, 2, 3].map((rank) => ({
    ...stats(rank === 2 ? { hash: "17aa03bb9c00e1d2f4a6b8c0", norm: 22.62741, differs: true, why: "hash differs from the majority (3 of 4)" } : {}),
    rank: rank === 0 ? 0 : rank,
    worker: `w${rank}`,
    step,
    time: 1700000000 + step,
  }));
}

describe("Tensor tables", () => {
  it("prints numbers with 6 significant digits, exponents for the very small and large", () => {
    assert.strictEqual(formatNumber(22.6274), "22.6274");
    assert.strictEqual(formatNumber(0.000012345678), "1.23457e-05");
    assert.strictEqual(formatNumber(1234567890.5), "1.23457e+09");
    assert.strictEqual(formatNumber(0.5), "0.5");
    assert.strictEqual(formatNumber(3), "3");
    assert.strictEqual(formatNumber(null), "-");
    assert.strictEqual(formatNumber(Number.NaN), "nan");
  });

  it("says a tensor's summary on one line, never its numbers", () => {
    assert.strictEqual(summaryText(stats({ shape: [1024, 4096], device: "cuda:0", norm: 32, nan: 2 })), "Tensor[1024, 4096] float32 cuda:0 norm=3.2e+01 mean=1.2e-02 nan=2");
    assert.strictEqual(summaryText({ name: "cfg", value: "{'lr': 0.1}" }), "{'lr': 0.1}");
    assert.strictEqual(summaryText({ name: "x", error: "NameError: name 'x' is not defined" }), "<NameError: name 'x' is not defined>");
  });

  it("marks the cells the broker's reason names", () => {
    const marked = (why: string) => STAT_COLUMNS.filter((_, i) => markedColumns(why)[i]);
    assert.deepStrictEqual(marked("hash differs from the majority (3 of 4)"), ["hash"]);
    assert.deepStrictEqual(marked("norm 4.4e-05 relative off the median (rtol 1e-05); mean 2.0e-03 relative off the median (rtol 1e-05)"), ["mean", "norm"]);
    assert.deepStrictEqual(marked("shape [3]; dtype float64"), ["shape", "dtype"]);
    assert.deepStrictEqual(
      marked("device cpu, the majority on cuda (hashed another way there); hash differs from the majority (3 of 4)"),
      ["device", "hash"],
    );
    assert.deepStrictEqual(marked(""), []);
  });

  it("groups inspect rows by name and step, ranks in order, the perturbed rank flagged", () => {
    const groups = inspectGroups([...inspectRows(7), ...inspectRows(8)].reverse());
    assert.deepStrictEqual(
      groups.map((g) => [g.name, g.step, g.rows.map((r) => r.rank), g.flagged]),
      [
        ["grad", 8, [0, 1, 2, 3], [2]],
        ["grad", 7, [0, 1, 2, 3], [2]],
      ],
    );
    const rank2 = groups[0].rows[2];
    assert.strictEqual(rank2.differs, true);
    assert.strictEqual(rank2.cells[STAT_COLUMNS.indexOf("hash")], "17aa03bb9c00");
    assert.deepStrictEqual(
      STAT_COLUMNS.filter((_, i) => rank2.marked[i]),
      ["hash"],
    );
    assert.strictEqual(groupVerdict(groups[0]), "rank 2 differs (hash differs from the majority (3 of 4))");
    assert.strictEqual(groupVerdict(inspectGroups(inspectRows(1).map((r) => ({ ...r, differs: false, why: null })))[0]), "all 4 ranks agree");
  });

  it("takes the newest step every rank has sent for the latest, not one only the fastest rank has", () => {
    const partial = inspectRows(9).slice(0, 1);
    const rows = [...inspectRows(7), ...inspectRows(8), ...partial];
    assert.deepStrictEqual(newestCompleteStep(rows).map((r) => [r.step, r.rank]), [[8, 0], [8, 1], [8, 2], [8, 3]]);
    assert.deepStrictEqual(newestCompleteStep([]), []);
  });

  it("lists the names recorded with their steps, newest first, and the flagged count at the newest", () => {
    const names = inspectNames([...inspectRows(7), ...inspectRows(8), { ...inspectRows(3)[0], name: "loss" }]);
    assert.deepStrictEqual(names, [
      { name: "grad", steps: [8, 7], ranks: 4, flagged: 1 },
      { name: "loss", steps: [3], ranks: 1, flagged: 0 },
    ]);
  });

  it("shows the flagged rank's row marked in the page, with its reason, and no script", () => {
    const groups = inspectGroups(inspectRows(8));
    const html = tensorPageHtml("Inspect grad", "Latest step", groups, "none");
    assert.match(html, /<tr class="flagged" data-rank="2"/);
    assert.strictEqual((html.match(/<tr class="flagged"/g) ?? []).length, 1);
    assert.strictEqual((html.match(/<tr class="agrees"/g) ?? []).length, 3);
    assert.match(html, /hash differs from the majority \(3 of 4\)/);
    assert.match(html, /<th>norm<\/th>/);
    assert.ok(!html.includes("<script"), "no script in the panel");
    assert.ok(!tensorGroupHtml(groups[0]).includes("<script"));
  });

  it("turns a compare's snapshot rows into one row per worker's first capture, flagged as the broker flagged them", () => {
    const row = (rank: number, time: number, v: Partial<TensorSummary>): SnapshotRow => ({
      rank,
      worker: `w${rank}`,
      time,
      frames: [{ path: "/demo.py", line: 57, function: "step", locals: { step: String(time) } }],
      values: [stats({ expression: "grad", ...v })],
    });
    const rows = [
      row(1, 10, {}),
      row(0, 10, {}),
      row(3, 11, {}),
      row(2, 12, { hash: "0ff", differs: true, why: "hash differs from the majority (3 of 4)" }),
      row(2, 13, {}), // a second capture of a one-shot point is not shown
    ];
    const groups = compareGroups(rows);
    assert.strictEqual(groups.length, 1);
    assert.deepStrictEqual(groups[0].rows.map((r) => [r.rank, r.differs]), [[0, false], [1, false], [2, true], [3, false]]);
    assert.deepStrictEqual(groups[0].flagged, [2]);
    assert.strictEqual(groups[0].step, null);
    assert.strictEqual(capturedWorkers(rows), 4);
    assert.strictEqual(capturedWorkers([{ ...rows[0], values: [] }]), 0);
  });

  it("shows an expression that raised, or that is no tensor, in a value column", () => {
    const rows: SnapshotRow[] = [
      { rank: 0, worker: "w0", time: 1, frames: [], values: [{ name: "cfg", expression: "cfg", value: "{'lr': 0.1}", differs: false, why: null }] },
      { rank: 1, worker: "w1", time: 1, frames: [], values: [{ name: "cfg", expression: "cfg", error: "NameError: name 'cfg' is not defined", differs: true, why: "value differs from the majority" }] },
    ];
    const [g] = compareGroups(rows);
    assert.strictEqual(g.hasNotes, true);
    assert.deepStrictEqual(g.rows.map((r) => [r.note, r.isError]), [["{'lr': 0.1}", false], ["NameError: name 'cfg' is not defined", true]]);
    const html = tensorGroupHtml(g);
    assert.match(html, /<th>value<\/th>/);
    assert.match(html, /class="error"/);
  });

  it("puts a compare's values above the locals in the snapshot panel", () => {
    const rows: SnapshotRow[] = inspectRows(1).map((r) => ({ rank: r.rank, worker: r.worker, time: 5, frames: [{ path: "/d.py", line: 3, function: "f", locals: {} }], values: [r] }));
    const html = snapshotHtml("Compare grad", snapshotTable(rows, 1), "one-shot", tensorGroupHtml(compareGroups(rows)[0]));
    assert.ok(html.indexOf('data-rank="2"') < html.indexOf("Locals of the innermost frame"));
  });

  it("asks GET /v1/inspect only for what narrows it", () => {
    assert.strictEqual(inspectQueryString({}), "");
    assert.strictEqual(inspectQueryString({ name: "model.fc.weight", step: "all", rtol: 1e-4 }), "?name=model.fc.weight&step=all&rtol=0.0001");
    assert.strictEqual(inspectQueryString({ name: "grad", step: "" }), "?name=grad");
  });
});
