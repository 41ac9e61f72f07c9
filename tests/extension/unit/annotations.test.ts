// What a line with cluster breakpoints shows: this window's points as before,
// every other owner's as "set from the terminal: …", on made-up points (plain mocha).
import * as assert from "assert";
import { AnnotatedPoint, armedLabel, breakpointLineText, foreignLineText, hoverText, isOwnedBy, lineAnnotations, ownerLabel } from "../../../extension/breakpoints/annotations";

const ME = "vscode:abc";

function point(over: Partial<AnnotatedPoint>): AnnotatedPoint {
  return { line: 1, condition: null, hitCondition: null, logMessage: null, scope: null, armed: 0, owner: ME, ...over };
}

describe("Breakpoint annotations by owner", () => {
  it("names the owner the way a person says it", () => {
    assert.strictEqual(ownerLabel("cli"), "the terminal");
    assert.strictEqual(ownerLabel("api"), "an HTTP client");
    assert.strictEqual(ownerLabel("vscode:other"), "another VS Code window");
    assert.strictEqual(ownerLabel("lsp"), "the language server's quick fix");
    assert.strictEqual(ownerLabel("my-script"), '"my-script"');
  });

  it("counts a point with no owner (a broker older than owners) as the editor's", () => {
    assert.ok(isOwnedBy({ owner: undefined }, ME));
    assert.ok(isOwnedBy({ owner: ME }, ME));
    assert.ok(!isOwnedBy({ owner: "cli" }, ME));
  });

  it('shows a terminal point as "set from the terminal: [rank 0] step > 1 · armed on 2"', () => {
    const cli = point({ line: 4, condition: "[rank 0] step > 1", scope: "rank 0", armed: 2, owner: "cli" });
    assert.strictEqual(foreignLineText(cli), "  ⟵ set from the terminal: [rank 0] step > 1 · armed on 2");
    assert.strictEqual(foreignLineText(point({ owner: "api", logMessage: "x={x}" })), '  ⟵ set from an HTTP client: logs "x={x}" · armed on 0');
    assert.strictEqual(foreignLineText(point({ owner: "vscode:zz" })), "  ⟵ set from another VS Code window: all workers · armed on 0");
    assert.match(foreignLineText(point({ owner: "cli", condition: "x".repeat(100) })), /x…$|x… · armed on 0$/);
  });

  it("keeps the editor's own line text, and adds other owners' after it on a shared line", () => {
    const mine = point({ line: 2, condition: "[rank 3]", scope: "rank 3", armed: 1 });
    const cli = point({ line: 2, condition: "[rank 0]", scope: "rank 0", armed: 1, owner: "cli" });
    const other = point({ line: 5, owner: "cli" });
    const lines = lineAnnotations([cli, other, mine], ME);
    assert.deepStrictEqual(
      lines.map((l) => [l.line, l.text]),
      [
        [2, "  ⟵ rank 3 · armed on 1  ⟵ set from the terminal: [rank 0] · armed on 1"],
        [5, "  ⟵ set from the terminal: all workers · armed on 0"],
      ],
    );
    assert.match(lines[0].hover, /set from the terminal; edit it there/);
    assert.doesNotMatch(hoverText([mine], ME), /set from/);
  });

  it("shows a plain breakpoint of the firstRank default as rank 0 of each job (issue 25, item 7)", () => {
    const armed_on = [
      { worker: "w0", rank: 0, pid: 4240 },
      { worker: "t1", rank: null, pid: 4299 },
    ];
    assert.strictEqual(breakpointLineText(point({ scope: "first rank", armed: 2, armed_on })), "  ⟵ rank 0 of each job · armed on rank 0 + 1 unranked");
    assert.strictEqual(breakpointLineText(point({ scope: null, armed: 0, armed_on: [] })), "  ⟵ all workers · armed on none");
  });

  it('says which ranks armed a point: "[rank 0]" armed on rank 0, not "armed on 2" (issue #13, item 7)', () => {
    const armed_on = [
      { worker: "w0", rank: 0, pid: 4240 },
      { worker: "w9", rank: null, pid: 4299 },
    ];
    const bp = point({ condition: "[rank 0]", scope: "rank 0", armed: 2, armed_on, pending: 1 });
    assert.strictEqual(breakpointLineText(bp), "  ⟵ rank 0 · armed on rank 0 + 1 unranked");
    assert.strictEqual(armedLabel({ armed: 3, armed_on: [0, 2, 3].map((r) => ({ worker: `w${r}`, rank: r, pid: r })) }), "ranks 0,2-3");
    assert.strictEqual(armedLabel({ armed: 0, armed_on: [] }), "none");
    assert.strictEqual(armedLabel({ armed: 2 }), "2", "a broker without armed_on: the count");
    const hover = hoverText([bp], ME);
    assert.match(hover, /armed on: rank 0 \(pid 4240\), pid 4299/);
    assert.match(hover, /not taken yet by 1 live worker/);
    const two = lineAnnotations([bp, point({ condition: "[rank 3]", scope: "rank 3", armed: 1, armed_on: [{ worker: "w3", rank: 3, pid: 4243 }] })], ME);
    assert.strictEqual(two[0].text, "  ⟵ rank 0 · rank 3 · armed on ranks 0,3 + 1 unranked");
  });
});
