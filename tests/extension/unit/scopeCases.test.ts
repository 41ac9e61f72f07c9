// The rank-scope grammar against the table of cases the Python parser reads too
// (tests/scope_cases.json): the scopes split off a condition, the ranks, nodes
// and actors they name, and the Python rest. The extension does not validate
// (the broker does): for the cases marked "error" it must only not throw.
import * as assert from "assert";
import * as fs from "fs";
import * as path from "path";
import { rankScopeOf, scopeNamesOf, setRankScope, splitCondition } from "../../../extension/breakpoints/rankScope";

interface ScopeCase {
  condition: string;
  ranks?: number[] | null;
  nodes?: string[];
  actors?: string[];
  groups?: string[];
  roles?: string[];
  rest?: string | null;
  text?: string | null;
  error?: string;
}

const TABLE = path.resolve(__dirname, "../../../tests/scope_cases.json");
const cases = (JSON.parse(fs.readFileSync(TABLE, "utf8")) as { cases: ScopeCase[] }).cases;

describe("Rank scope: the shared case table (tests/scope_cases.json)", () => {
  it("has cases, some of them marked as errors", () => {
    assert.ok(cases.length >= 10, `${cases.length} cases in ${TABLE}`);
    assert.ok(cases.some((c) => c.error));
  });

  for (const c of cases) {
    if (c.error) {
      it(`does not throw on ${JSON.stringify(c.condition)} (the broker refuses it: ${c.error})`, () => {
        assert.doesNotThrow(() => {
          splitCondition(c.condition);
          rankScopeOf(c.condition);
          scopeNamesOf(c.condition, "node");
          setRankScope(c.condition, [1]);
        });
      });
      continue;
    }
    it(`splits ${JSON.stringify(c.condition)} into ranks ${JSON.stringify(c.ranks)}, nodes ${JSON.stringify(c.nodes)}, actors ${JSON.stringify(c.actors)}, rest ${JSON.stringify(c.rest)}`, () => {
      const split = splitCondition(c.condition);
      assert.strictEqual(split.rest, c.rest ?? "", "the Python rest (JSON null is no rest)");
      assert.deepStrictEqual(rankScopeOf(c.condition) ?? null, c.ranks ?? null, "ranks");
      assert.deepStrictEqual(scopeNamesOf(c.condition, "node"), c.nodes ?? [], "nodes");
      assert.deepStrictEqual(scopeNamesOf(c.condition, "actor"), c.actors ?? [], "actors");
      assert.deepStrictEqual(scopeNamesOf(c.condition, "group"), c.groups ?? [], "groups");
      assert.deepStrictEqual(scopeNamesOf(c.condition, "role"), c.roles ?? [], "roles");
      assert.strictEqual(split.scopes.length > 0, c.text !== null && c.text !== undefined, "a scope exactly when the broker has a scope text");
    });
  }
});
