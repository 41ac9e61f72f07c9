// Text from the cluster reaches the editor escaped (#37): the one function, and the labels,
// descriptions, tooltips and lines the views build from hostile names (plain mocha, no window).
import * as assert from "assert";
import { markdownText, multiLine, oneLine, safeTreeTexts } from "../../../extension/common/textSafe";
import { workerDescription, workerLabel, workerPickItems, workerTooltip } from "../../../extension/cluster/workerGrouping";
import { logpointText } from "../../../extension/breakpoints/logpointText";
import { LogFollower } from "../../../extension/views/logFollower";
import { parallelItems } from "../../../extension/views/parallelTree";
import { collectiveItems } from "../../../extension/views/collectivesModel";
import { makeWorker } from "./workerFixture";

/** Paints the rest red and forges a row of its own. */
const EVIL = "\x1b[31mX\nFAKE  ROW";

const HOSTILE = [
  "\x1b]0;title\x07",
  "ok\rFORGED",
  "\x9b31m",
  "\x7f\x00\x08",
  "admin\u202egnp.exe",
  "\u2066hidden\u2069 \u200b\ufeff",
  "a\u2028b\u2029c",
  "\ud800",
  "\u{e0041}",
];

/** The characters a terminal or the editor would act on or hide, but for those in `allowed`. */
function rawControls(text: string, allowed = ""): string[] {
  return [...text].filter((c) => !allowed.includes(c) && /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u.test(c));
}

describe("textSafe", () => {
  it("shows every control, bidi and invisible character escaped on one line", () => {
    assert.strictEqual(oneLine(EVIL), "\\x1b[31mX\\nFAKE  ROW");
    assert.strictEqual(oneLine("tab\there"), "tab\\there");
    assert.strictEqual(oneLine("admin\u202egnp.exe"), "admin\\u202egnp.exe");
    assert.strictEqual(oneLine("\x9b"), "\\x9b");
    assert.strictEqual(oneLine("\ud800"), "\\ud800");
    assert.strictEqual(oneLine("\u{e0041}"), "\\U000e0041");
    for (const text of HOSTILE) {
      assert.deepStrictEqual(rawControls(oneLine(text)), [], JSON.stringify(text));
    }
  });

  it("leaves plain text, other scripts and emoji alone, and escaping twice changes nothing", () => {
    for (const text of ["train.py:42 in fit", "rank 3 · pid 812", "Größe", "日本語", "emoji 🚀", "a\\x1b b", ""]) {
      assert.strictEqual(oneLine(text), text);
      assert.strictEqual(multiLine(text), text);
    }
    for (const text of [...HOSTILE, EVIL]) {
      assert.strictEqual(oneLine(oneLine(text)), oneLine(text));
    }
    assert.strictEqual(oneLine(42), "42");
  });

  it("keeps the lines and tabs of multi-line text, nothing else", () => {
    assert.strictEqual(multiLine("a\n\tb\x1b[0m\r"), "a\n\tb\\x1b[0m\\r");
    for (const text of HOSTILE) {
      assert.deepStrictEqual(rawControls(multiLine(text), "\n\t"), []);
    }
  });

  it("makes no link, image or heading of a name in a Markdown tooltip", () => {
    assert.strictEqual(markdownText("[x](command:rm)"), "\\[x\\]\\(command:rm\\)");
    assert.strictEqual(markdownText("# \x1b"), "\\# \\\\x1b");
  });

  it("escapes a tree item's label and description to one line and its tooltip's lines", () => {
    const shown = safeTreeTexts({ label: EVIL, description: "d\u202e", tooltip: "line 1\nline\x1b 2", id: "keep" });
    assert.deepStrictEqual(shown, { label: "\\x1b[31mX\\nFAKE  ROW", description: "d\\u202e", tooltip: "line 1\nline\\x1b 2", id: "keep" });
  });
});

describe("Labels built from hostile cluster text", () => {
  const w = makeWorker({
    rank: 0,
    actor_class: EVIL,
    actor_name: "name\u202e",
    task: "fit\x1b[2J",
    state: "paused",
    paused_at: { path: "/a/x\x1b.py", line: 3, reason: "breakpoint" },
  });

  it("the Cluster view's worker label, description and tooltip", () => {
    assert.strictEqual(workerLabel(w), "rank 0 · \\x1b[31mX\\nFAKE  ROW · pid 100");
    assert.strictEqual(workerDescription(w), "paused at x\\x1b.py:3");
    const tip = workerTooltip(w, { now: 0 });
    assert.deepStrictEqual(rawControls(tip, "\n"), []);
    assert.ok(tip.includes("actor class: \\x1b[31mX\\nFAKE  ROW\n"), tip);
    assert.ok(!tip.split("\n").includes("FAKE  ROW"), "a name forges no tooltip row");
    const [pick] = workerPickItems([w]);
    assert.deepStrictEqual(rawControls(pick.label + pick.description + pick.detail), []);
  });

  it("a logpoint line: one line, no ANSI sequence for the Debug Console", () => {
    assert.strictEqual(logpointText({ rank: 3, worker: "w", message: EVIL }), "[rank 3] \\x1b[31mX\\nFAKE  ROW");
  });

  it("a worker's log: its lines kept, its escape sequences shown", async () => {
    const f = new LogFollower("rank 0 (stdout)\x1b[8m", async () => ({ worker: "w0", stream: "out" as const, path: "/tmp/l\u202e.out", offset: 0, data: "step 1\r\n\x1b[32mok\x1b[0m\n", size: 20, next_offset: 20 }));
    await f.poll();
    assert.deepStrictEqual(rawControls(f.text, "\n"), []);
    assert.ok(f.text.endsWith("step 1\n\\x1b[32mok\\x1b[0m\n"), f.text);
    assert.ok(f.text.startsWith("# rank 0 (stdout)\\x1b[8m · /tmp/l\\u202e.out"), f.text);
  });

  it("the Parallel Stacks and Collectives items as their views show them", () => {
    const node = { function: EVIL, path: "/p/t\u202e.py", line: 2, ranks: [0], workers: ["w0"], branch: false, children: [], job_id: "j\x1b" };
    const collective = { group: EVIL, rank: 0, worker: "w0", last_enqueued: 1, last_started: 1, last_completed: 1, op: "all\x1b", state: "started\n", behind: true };
    const shown = [...parallelItems([node], [w]), ...collectiveItems([collective]).flatMap((g) => [g, ...g.children])].map(safeTreeTexts);
    for (const item of shown) {
      assert.deepStrictEqual(rawControls(item.label + item.description), [], item.label);
      assert.deepStrictEqual(rawControls(item.tooltip, "\n"), [], item.tooltip);
    }
  });
});
