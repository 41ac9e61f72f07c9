// What the editor shows at a line with cluster breakpoints: this window's own
// points as "  ⟵ ranks 0,2 · armed on 2", points other owners set (the
// terminal, an HTTP client, another window) as "  ⟵ set from the terminal:
// [rank 0] step > 1 · armed on 2", and the hover. Pure text, no vscode import.
import type { ArmedOn, ClusterBreakpoint } from "../broker/types";
import { formatRanks } from "../common/ranks";

export interface LineAnnotation {
  /** 1-based. */
  line: number;
  text: string;
  hover: string;
}

/** The fields of a cluster breakpoint the texts use. */
export type AnnotatedPoint = Pick<ClusterBreakpoint, "line" | "condition" | "hitCondition" | "logMessage" | "scope" | "armed" | "owner" | "armed_on" | "pending">;

/**
 * Which workers have a point armed, in a few words: "rank 0", "ranks 0,2-3",
 * "ranks 0-1 + 1 unranked", "none"; a broker without armed_on: the count.
 */
export function armedLabel(bp: { armed?: number; armed_on?: ArmedOn[] }): string {
  if (!bp.armed_on) {
    return String(bp.armed ?? 0);
  }
  const ranks = bp.armed_on.map((a) => a.rank).filter((r): r is number => typeof r === "number");
  const unranked = bp.armed_on.length - ranks.length;
  const parts = [
    ranks.length ? `rank${ranks.length > 1 ? "s" : ""} ${formatRanks(ranks)}` : "",
    unranked ? `${unranked} unranked` : "",
  ].filter(Boolean);
  return parts.length ? parts.join(" + ") : "none";
}

/** The hover's list of armed workers: "rank 0 (pid 4242), pid 4250". */
function armedWorkers(armedOn: readonly ArmedOn[]): string {
  return armedOn.map((a) => (typeof a.rank === "number" ? `rank ${a.rank} (pid ${a.pid ?? "?"})` : `pid ${a.pid ?? "?"}`)).join(", ");
}

/** True for a point this owner set; a broker older than owners names none, and then every point is the editor's. */
export function isOwnedBy(bp: { owner?: string }, owner: string): boolean {
  return bp.owner === undefined || bp.owner === null || bp.owner === owner;
}

/** Who set a point, for "set from …": "cli" → "the terminal", "api" → "an HTTP client", "lsp" → the language server, another "vscode:…" → "another VS Code window". */
export function ownerLabel(owner: string | undefined): string {
  if (owner === "cli") {
    return "the terminal";
  }
  if (owner === "api" || !owner) {
    return "an HTTP client";
  }
  if (owner === "lsp") {
    return "the language server's quick fix";
  }
  if (owner.startsWith("vscode:")) {
    return "another VS Code window";
  }
  return `"${owner}"`;
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
      if (p === "first rank") {
        return "rank 0 of each job"; // a plain breakpoint under raySleuth.plainBreakpoints "firstRank"
      }
      const m = /^(rank|node|actor)s?\s+(.*)$/.exec(p);
      const several = m && (m[1] === "rank" ? /[,-]/ : /,/).test(m[2]);
      return m && several ? `${m[1]}s ${m[2]}` : p;
    })
    .join(" · ");
}

/** What a cluster breakpoint's line shows after its text, e.g. "  ⟵ ranks 0,2 · armed on 2". */
export function breakpointLineText(bp: { scope: string | null; armed?: number; armed_on?: ArmedOn[] }): string {
  return `  ⟵ ${scopeLabel(bp.scope)} · armed on ${armedLabel(bp)}`;
}

const MAX_SUMMARY = 60;

/** A point in a few words: its condition as written ("[rank 0] step > 1"), else what it logs, else "all workers". */
export function pointSummary(bp: Pick<AnnotatedPoint, "condition" | "logMessage" | "scope">): string {
  const parts = [bp.condition?.trim(), bp.logMessage ? `logs "${bp.logMessage}"` : ""].filter((p): p is string => !!p);
  const text = parts.length ? parts.join(" ") : scopeLabel(bp.scope);
  return text.length > MAX_SUMMARY ? `${text.slice(0, MAX_SUMMARY - 1)}…` : text;
}

/** What a line shows for a point another owner set, e.g. "  ⟵ set from the terminal: [rank 0] step > 1 · armed on 2". */
export function foreignLineText(bp: AnnotatedPoint): string {
  return `  ⟵ set from ${ownerLabel(bp.owner)}: ${pointSummary(bp)} · armed on ${armedLabel(bp)}`;
}

/** The hover's markdown for the cluster breakpoints of one line. */
export function hoverText(bps: readonly AnnotatedPoint[], owner: string): string {
  return bps
    .map((bp) => {
      const from = isOwnedBy(bp, owner) ? "" : ` — set from ${ownerLabel(bp.owner)}; edit it there, the editor leaves it alone`;
      const rows = [
        `**Ray Sleuth cluster breakpoint** — ${scopeLabel(bp.scope)}, armed on ${bp.armed} worker${bp.armed === 1 ? "" : "s"}${from}`,
        bp.condition ? `condition: \`${bp.condition}\`` : "",
        bp.hitCondition ? `hit count: \`${bp.hitCondition}\`` : "",
        bp.logMessage ? `logs: \`${bp.logMessage}\`` : "",
        bp.armed_on?.length ? `armed on: ${armedWorkers(bp.armed_on)}` : "",
        bp.pending ? `not taken yet by ${bp.pending} live worker${bp.pending === 1 ? "" : "s"} (they take it within a second)` : "",
      ];
      return rows.filter(Boolean).join("  \n");
    })
    .join("\n\n---\n\n");
}

/** One annotation per line that has cluster breakpoints: this owner's points first (as one text), then each other owner's. */
export function lineAnnotations(bps: readonly AnnotatedPoint[], owner: string): LineAnnotation[] {
  const byLine = new Map<number, AnnotatedPoint[]>();
  for (const bp of bps) {
    byLine.set(bp.line, [...(byLine.get(bp.line) ?? []), bp]);
  }
  return [...byLine]
    .sort(([a], [b]) => a - b)
    .map(([line, all]) => {
      const mine = all.filter((b) => isOwnedBy(b, owner));
      const others = all.filter((b) => !isOwnedBy(b, owner));
      const texts: string[] = [];
      if (mine.length === 1) {
        texts.push(breakpointLineText(mine[0]));
      } else if (mine.length > 1) {
        // Several points on one line: the workers that have any of them armed.
        const byWorker = new Map(mine.flatMap((b) => b.armed_on ?? []).map((a) => [a.worker, a]));
        const armedOn = mine.every((b) => b.armed_on) ? [...byWorker.values()] : undefined;
        texts.push(breakpointLineText({ scope: mine.map((b) => b.scope ?? "all").join("; "), armed: Math.max(...mine.map((b) => b.armed ?? 0)), armed_on: armedOn }));
      }
      texts.push(...others.map(foreignLineText));
      return { line, text: texts.join(""), hover: hoverText([...mine, ...others], owner) };
    });
}
