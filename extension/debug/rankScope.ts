// Pure editing of the scope prefix of a breakpoint condition, e.g.
// "[rank 0,2-3] step % 100 == 0" (ARCHITECTURE.md, "Rank scope in the editor"),
// and the short texts shown next to a cluster breakpoint. No vscode import.
// The broker is the one that validates a condition: this only rewrites prefixes.

export type ScopeKind = "rank" | "node" | "actor";

/** The spellings the broker accepts (raysleuth/scope.py, KINDS). */
const KINDS: Record<string, ScopeKind> = { rank: "rank", ranks: "rank", node: "node", nodes: "node", actor: "actor", actors: "actor" };

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

/** "0,2-3" → [0, 2, 3]; undefined when the text is not a list of ranks and ranges. */
export function parseRanks(text: string): number[] | undefined {
  const out = new Set<number>();
  for (const part of text.replace(/\s+/g, "").split(",")) {
    if (!part) {
      continue;
    }
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) {
      return undefined;
    }
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo || hi - lo > 1 << 16) {
      return undefined;
    }
    for (let r = lo; r <= hi; r++) {
      out.add(r);
    }
  }
  return out.size ? [...out].sort((a, b) => a - b) : undefined;
}

/** [3, 0, 2] → "0,2-3" (sorted, runs as ranges, duplicates dropped). */
export function formatRanks(ranks: readonly number[]): string {
  const items = [...new Set(ranks)].sort((a, b) => a - b);
  const runs: string[] = [];
  for (let i = 0; i < items.length; ) {
    let j = i;
    while (j + 1 < items.length && items[j + 1] === items[j] + 1) {
      j++;
    }
    runs.push(i === j ? String(items[i]) : `${items[i]}-${items[j]}`);
    i = j + 1;
  }
  return runs.join(",");
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

/** The broker's scope text made readable: "rank 0,2-3" → "ranks 0,2-3", null → "all workers". */
export function scopeLabel(scope: string | null | undefined): string {
  if (!scope) {
    return "all workers";
  }
  return scope
    .split(";")
    .map((p) => p.trim())
    .filter(Boolean)
    .map((p) => {
      const m = /^(rank|node|actor)s?\s+(.*)$/.exec(p);
      const several = m && (m[1] === "rank" ? /[,-]/ : /,/).test(m[2]);
      return m && several ? `${m[1]}s ${m[2]}` : p;
    })
    .join(" · ");
}

/** What a cluster breakpoint's line shows after its text, e.g. "  ⟵ ranks 0,2 · armed on 2". */
export function breakpointLineText(bp: { scope: string | null; armed: number }): string {
  return `  ⟵ ${scopeLabel(bp.scope)} · armed on ${bp.armed}`;
}
