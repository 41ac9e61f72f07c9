// Pure reading and editing of the scope prefix of a breakpoint condition, e.g.
// "[rank 0,2-3] step % 100 == 0" (docs/contract.md, "Rank scope").
// No vscode import.
// The broker is the one that validates a condition: this only rewrites prefixes.
// Its cases are shared with the Python parser: tests/scope_cases.json.
import { formatRanks, parseRanks } from "../common/ranks";

export type ScopeKind = "rank" | "node" | "actor" | "group" | "role";

/** The spellings the broker accepts (raysleuth/scope.py, KINDS). */
const KINDS: Record<string, ScopeKind> = { rank: "rank", ranks: "rank", node: "node", nodes: "node", actor: "actor", actors: "actor", group: "group", groups: "group", role: "role", roles: "role" };

const SCOPE_RE = /^\s*\[\s*([A-Za-z_]+)\s*([^\]]*)\]/;

export interface ScopePart {
  kind: ScopeKind;
  /** The text after the kind, e.g. "0,2-3". */
  arg: string;
  /** The part as written, brackets included, e.g. "[rank 0,2-3]". */
  text: string;
}

export interface SplitCondition {
  /** The leading scopes, in order. */
  scopes: ScopePart[];
  /** The Python condition after them ("" when none). */
  rest: string;
}

/**
 * Splits the leading scopes off a condition. A bracket whose first word is no
 * scope kind ("[x for x in xs] == []") is Python and stays in `rest`.
 */
export function splitCondition(condition: string | null | undefined): SplitCondition {
  let text = condition ?? "";
  const scopes: ScopePart[] = [];
  for (;;) {
    const m = SCOPE_RE.exec(text);
    const kind = m ? KINDS[m[1].toLowerCase()] : undefined;
    if (!m || !kind) {
      break;
    }
    scopes.push({ kind, arg: m[2].trim(), text: m[0].trim() });
    text = text.slice(m[0].length);
  }
  return { scopes, rest: text.trim() };
}

/** The ranks a condition's rank scopes admit (several intersect, as the broker does); undefined: no rank scope. */
export function rankScopeOf(condition: string | null | undefined): number[] | undefined {
  let ranks: number[] | undefined;
  for (const s of splitCondition(condition).scopes) {
    if (s.kind !== "rank") {
      continue;
    }
    const r = parseRanks(s.arg) ?? [];
    ranks = ranks === undefined ? r : ranks.filter((x) => r.includes(x));
  }
  return ranks;
}

/** The names a condition's node, actor, group or role scopes list ("[node a,b]" → ["a", "b"]), in order. */
export function scopeNamesOf(condition: string | null | undefined, kind: "node" | "actor" | "group" | "role"): string[] {
  return splitCondition(condition)
    .scopes.filter((s) => s.kind === kind)
    .flatMap((s) => s.arg.split(","))
    .map((n) => n.trim())
    .filter(Boolean);
}

/**
 * The condition with its rank scope replaced by `[rank <ranks>]` (first), other
 * scopes and the Python part kept. No ranks: the rank scope is removed.
 * Undefined when nothing is left (a plain breakpoint).
 */
export function setRankScope(condition: string | null | undefined, ranks: readonly number[]): string | undefined {
  const { scopes, rest } = splitCondition(condition);
  const parts = [
    ranks.length ? `[rank ${formatRanks(ranks)}]` : "",
    ...scopes.filter((s) => s.kind !== "rank").map((s) => s.text),
    rest,
  ].filter((p) => p !== "");
  return parts.length ? parts.join(" ") : undefined;
}
