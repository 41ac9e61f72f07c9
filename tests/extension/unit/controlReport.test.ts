// What Pause Rank… and Continue All Paused say about the broker's answer
// (issue #13, item 4): pending and skipped ranks with the broker's reason, and
// the pending pauses a continue called off. Plain mocha.
import * as assert from "assert";
import { WorkerInfo } from "../../../extension/broker/types";
import { continueReport, pauseReport } from "../../../extension/breakpoints/controlReport";

const workers = [1, 3].map(
  (rank) => ({ id: `w${rank}`, pid: 4240 + rank, rank, state: "running", agent: true }) as unknown as WorkerInfo,
);

describe("Pause and continue reports", () => {
  it("names a rank the broker could not pause yet, and why", () => {
    const r = pauseReport({ paused: ["w1"], pending: [{ worker: "w3", reason: "its main thread is in native code (time.sleep)" }], skipped: [] }, "with rank 1,3", workers);
    assert.strictEqual(r.level, "warning");
    assert.strictEqual(
      r.text,
      'Ray Sleuth: paused rank 1; rank 3 (its main thread is in native code (time.sleep)) will pause when it returns to Python ("Continue All Paused" calls that off).',
    );
  });

  it("names the ranks left alone, and says plain success quietly", () => {
    const r = pauseReport({ paused: [], skipped: [{ worker: "w3", reason: "no agent" }] }, "with rank 3", workers);
    assert.strictEqual(r.level, "warning");
    assert.match(r.text, /left rank 3 \(no agent\) as they were/);
    assert.deepStrictEqual(pauseReport({ paused: ["w1"] }, "with rank 1", workers), { level: "status", text: "Ray Sleuth: paused rank 1." });
    assert.strictEqual(pauseReport({ paused: [] }, "with rank 5", workers).text, "Ray Sleuth: no running worker with rank 5 to pause.");
  });

  it("says which pending pauses a continue called off", () => {
    const r = continueReport({ continued: ["w1"], cancelled: ["w3"] }, workers);
    assert.strictEqual(r.level, "info");
    assert.strictEqual(r.text, "Ray Sleuth: continued rank 1; called off the pending pause of rank 3.");
    assert.strictEqual(continueReport({ continued: [] }, workers).text, "Ray Sleuth: no worker is paused.");
    assert.strictEqual(continueReport({ continued: ["w9"] }, workers).text, "Ray Sleuth: continued worker w9.");
  });
});
