// The evaluate panel's decisions (issue 37): only the broker's refusal of an
// unbounded expression is offered "Run anyway" (and resent with force), and
// rows of a worker an evaluate holds busy are offered "End worker".
import * as assert from "assert";
import { statusError } from "../../../extension/broker/brokerErrors";
import { busyRows, busyText, evaluateBody, forceableRefusal } from "../../../extension/views/evaluateGuard";

const URL = "http://127.0.0.1:7311";
const REFUSED = JSON.stringify({
  error: "the expression may never finish: range(10 ** 12) has 10^12 items",
  hint: 'It would hold the worker\'s GIL until it ends. Bound it, or send it anyway with "force": true (`--force` on the command line).',
});

describe("evaluate guard", () => {
  it("offers Run anyway for the unbounded refusal only", () => {
    const refused = forceableRefusal(statusError(URL, 400, REFUSED, "POST /v1/evaluate"));
    assert.ok(refused);
    assert.match(refused.error, /may never finish/);
    assert.match(refused.hint, /"force": true/);
    const other = statusError(URL, 400, JSON.stringify({ error: "'expression' is missing", hint: "Send {...}" }), "POST /v1/evaluate");
    assert.strictEqual(forceableRefusal(other), undefined);
    assert.strictEqual(forceableRefusal(statusError(URL, 500, REFUSED, "POST /v1/evaluate")), undefined);
    assert.strictEqual(forceableRefusal(new Error("network")), undefined);
  });

  it("sends force only when asked", () => {
    assert.deepStrictEqual(evaluateBody("x", undefined, false), { expression: "x" });
    assert.deepStrictEqual(evaluateBody("x", [0, 2], true), { expression: "x", ranks: [0, 2], force: true });
  });

  it("names the busy workers to end", () => {
    const busy = { what: "evaluate", since: 1_700_000_000, expression: "sum(range(10**12))" };
    const rows = busyRows([
      { rank: 0, worker: "3f2a9c1b77", error: "still running after 10 s: …", busy },
      { rank: 1, worker: "8d8d8d8d11", value: "1" },
      { rank: 2, worker: "aaaaaaaa22", value: "1", busy: null },
    ]);
    assert.deepStrictEqual(rows.map((r) => r.worker), ["3f2a9c1b77"]);
    assert.match(busyText(rows[0]), /^rank 0 \(3f2a9c1b\) is busy: an evaluate since .+ holds it in C code \(sum\(range\(10\*\*12\)\)\)/);
  });
});
