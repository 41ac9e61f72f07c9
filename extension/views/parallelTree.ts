// The Parallel Stacks view's model (issue 27): the broker's parallel stack tree as tree items,
// each a frame with the ranks standing in or below it, the branch where ranks part marked, as
// HPC debuggers' parallel stack views show it. Pure, no vscode import (plain mocha tests it).
import * as path from "path";
import type { ParallelStackNode, StacksResult, WorkerInfo } from "../broker/types";
import { formatRanks } from "../common/ranks";

export interface ParallelItem {
  id: string;
  node: ParallelStackNode;
  label: string;
  description: string;
  tooltip: string;
  children: ParallelItem[];
}

/** The roots of `GET /v1/stacks?tree=1` (one per job). */
export function rootsOf(result: StacksResult): ParallelStackNode[] {
  const t = result.tree;
  return !t ? [] : Array.isArray(t) ? t : [t];
}

/** "ranks 0-2,4 (4)": the ranks in or below a node, and how many workers. */
export function whoText(n: ParallelStackNode): string {
  const ranks = n.ranks.length ? `${n.ranks.length === 1 ? "rank" : "ranks"} ${formatRanks(n.ranks)}` : "no rank";
  return `${ranks} (${n.workers.length})`;
}

/** Library frames the broker folded into a node (issue #38): " · 5 library frames" on a library leaf, " · via 3 library frames" on a user frame. */
export function foldedText(n: ParallelStackNode): string {
  const count = (k: number) => `${k} library frame${k === 1 ? "" : "s"}`;
  if (n.library && n.frames?.length) {
    return ` · ${count(n.frames.length)}`;
  }
  return n.via?.length ? ` · via ${count(n.via.length)}` : "";
}

/** The folded frames, outermost first, for a node's hover. */
function foldedLines(n: ParallelStackNode): string[] {
  const frames = n.library ? (n.frames ?? []) : (n.via ?? []);
  return frames.length ? ["", n.library ? "library frames:" : "via:", ...frames.map((f) => `  ${f.function} (${f.path}:${f.line})`)] : [];
}

/** Tree items; `states` names each worker's state for the hovers. */
export function parallelItems(roots: readonly ParallelStackNode[], workers: readonly WorkerInfo[] = []): ParallelItem[] {
  const byId = new Map(workers.map((w) => [w.id, w]));
  const make = (n: ParallelStackNode, id: string): ParallelItem => {
    const where = n.path && n.line ? `${path.basename(n.path)}:${n.line}` : "";
    const members = n.workers
      .map((wid) => byId.get(wid))
      .filter((w): w is WorkerInfo => w !== undefined)
      .map((w) => `${w.rank !== null ? `rank ${w.rank}` : `pid ${w.pid ?? "?"}`}: ${w.state}`);
    return {
      id,
      node: n,
      label: n.job_id ? `job ${n.job_id.slice(0, 8)} · ${n.function}` : n.function,
      description: `${where ? `${where} · ` : ""}${whoText(n)}${foldedText(n)}${n.branch ? " · ranks part here" : ""}`,
      tooltip: [`${n.function}${where ? ` (${n.path}:${n.line})` : ""}`, whoText(n), ...foldedLines(n), ...(members.length ? ["", ...members] : [])].join("\n"),
      children: n.children.map((c, i) => make(c, `${id}/${i}`)),
    };
  };
  return roots.map((r, i) => make(r, `root${i}:${r.job_id ?? ""}`));
}
