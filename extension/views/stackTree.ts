// The Stacks view's content, shaped from one `GET /v1/stacks` answer: jobs →
// groups of ranks with the same stack → frames, which group holds the others
// back, the text a copy puts on the clipboard, and where a worker's file is on
// this machine. Pure data and text: no vscode import, tested in plain mocha.
import * as path from "path";
import { BehindRank, StackFrame, StackGroup, StacksResult, StacksWorker } from "../broker/types";
import type { PathMapping } from "../debug/attachConfig";
import { formatRanks } from "../common/ranks";
import { foldLibraryRuns, LibraryRun } from "./libraryFrames";

export { foldLibraryRuns };

/** Two or more library frames in a row, folded into one node (issue #38). */
export type StackLibraryNode = LibraryRun<StackFrameNode>;

export interface StackJobNode {
  kind: "job";
  id: string;
  jobId: string | null;
  label: string;
  description: string;
  children: (StackGroupNode | StackUnansweredNode)[];
}

export interface StackGroupNode {
  kind: "group";
  id: string;
  group: StackGroup;
  /** "ranks 0-2 (3)", "rank 3 (1)", "2 workers without a rank (2)". */
  label: string;
  description: string;
  tooltip: string;
  /** The group holds the others back (named in `behind`, else a minority): shown with a warning. */
  lagging: boolean;
  /** The `behind` entries of this group's workers. */
  behind: BehindRank[];
  /** The group's ranks, sorted (empty for workers without one). */
  ranks: number[];
  frames: StackFrameNode[];
  /** What the group opens to: its frames with each run of library frames folded into one node (issue #38). */
  shown: (StackFrameNode | StackLibraryNode)[];
}


export interface StackFrameNode {
  kind: "frame";
  id: string;
  frame: StackFrame;
  /** The group the frame belongs to (for the actions on it). */
  groupId: string;
  label: string;
  description: string;
  tooltip: string;
  /** Inside an installed package or the standard library, not the user's code. */
  library: boolean;
  /** The folded run of library frames it is shown in, if any. */
  runId?: string;
}

/** A worker that gave no stack (no answer in time, py-spy refused), with why. */
export interface StackUnansweredNode {
  kind: "unanswered";
  id: string;
  worker: StacksWorker;
  label: string;
  description: string;
  tooltip: string;
}

export type StackNode = StackJobNode | StackGroupNode | StackFrameNode | StackLibraryNode | StackUnansweredNode;

/** True for a frame of an installed package, the standard library or generated code. */
export function isLibraryPath(p: string): boolean {
  const posix = p.replace(/\\/g, "/");
  return !p || p.startsWith("<") || /\/(site|dist)-packages\//.test(posix) || /\/lib\/python\d+(\.\d+)?t?\//.test(posix);
}

/** A library's frame: the broker's `library` mark (verl's wrappers, Ray's Cython executor), else by its path. */
export function isLibraryFrame(f: StackFrame): boolean {
  return typeof f.library === "boolean" ? f.library : isLibraryPath(f.path);
}

/** The innermost frame of the user's own code, else the innermost frame. */
export function topUserFrame(frames: readonly StackFrame[]): StackFrame | undefined {
  return frames.find((f) => !isLibraryFrame(f)) ?? frames[0];
}

function base(p: string): string {
  return p.replace(/\\/g, "/").split("/").pop() ?? p;
}

/** A group's members as the CLI's text names them: "rank 3", "ranks 0-2", "2 workers", "ranks 0-2 and 1 more". */
function members(ranks: readonly number[], count: number): string {
  if (ranks.length === 0) {
    return count === 1 ? "1 worker" : `${count} workers`;
  }
  const text = `${ranks.length === 1 ? "rank" : "ranks"} ${formatRanks(ranks)}`;
  return count > ranks.length ? `${text} and ${count - ranks.length} more` : text;
}

/** "ranks 0-2 (3)", "rank 3 (1)", "2 workers (2)". */
export function groupLabel(g: StackGroup): string {
  const count = g.count ?? g.workers?.length ?? 0;
  return `${members(g.ranks ?? [], count)} (${count})`;
}

/** User frames the one-line summary shows before "← …" (as the CLI's). */
const SUMMARY_FRAMES = 3;

/** Decorators' inner functions: the summary names the call they wrap instead. */
const WRAPPER = /(wrapper|wrapped|inner|decorator|decorated)$/i;

/**
 * A stack in one line, innermost first, as `raysleuth stacks` writes it: the library
 * call the user's code is in, then up to three user frames:
 * "all_reduce ← train_step train.py:88 ← fit train.py:120".
 */
export function stackSummary(frames: readonly StackFrame[]): string {
  if (frames.length === 0) {
    return "(no frames)";
  }
  const place = (f: StackFrame) => `${f.function} ${base(f.path)}:${f.line}`;
  const firstUser = frames.findIndex((f) => !isLibraryFrame(f));
  let parts: string[];
  let more: boolean;
  if (firstUser < 0) {
    parts = frames.slice(0, SUMMARY_FRAMES).map(place);
    more = frames.length > SUMMARY_FRAMES;
  } else {
    const library = frames.slice(0, firstUser);
    const called = [...library].reverse().find((f) => !WRAPPER.test(f.function)) ?? library[library.length - 1];
    const user = frames.slice(firstUser).filter((f) => !isLibraryFrame(f));
    parts = [...(called ? [called.function] : []), ...user.slice(0, SUMMARY_FRAMES).map(place)];
    more = user.length > SUMMARY_FRAMES;
  }
  return [...parts, ...(more ? ["…"] : [])].join(" ← ");
}

/** "last entered #118; ranks 0-2 wait in …" from "rank 3 last entered #118; …": the label names the rank already. */
function whyWithoutRank(b: BehindRank): string {
  return b.rank === null ? b.why : b.why.replace(new RegExp(`^rank ${b.rank}\\s+`), "");
}

/** "rank 3 last entered #118; …" as it is; "rank 3: stack differs from …" where the reason does not name the rank. */
export function behindText(b: BehindRank): string {
  const who = b.rank === null ? `worker ${b.worker.slice(0, 8)}` : `rank ${b.rank}`;
  return b.why.startsWith(`${who} `) ? b.why : `${who}: ${b.why}`;
}

/** The `behind` entries that name a worker of the group. */
export function groupBehind(g: StackGroup, behind: readonly BehindRank[]): BehindRank[] {
  const ids = new Set(g.workers ?? []);
  return behind.filter((b) => ids.has(b.worker));
}

function jobKey(jobId: string | null): string {
  return jobId ?? "";
}

/** The groups a job's lagging marks go to: those named in `behind` when any is, else the minority ones. */
function laggingGroups(groups: readonly StackGroup[], behind: readonly BehindRank[]): Set<StackGroup> {
  const named = groups.filter((g) => groupBehind(g, behind).length > 0);
  return new Set(named.length ? named : groups.filter((g) => g.minority));
}

function frameTooltip(f: StackFrame): string {
  return `${f.function} — ${f.path}:${f.line}${f.code ? `\n\n${f.code.trim()}` : ""}`;
}

function groupNode(g: StackGroup, index: number, behind: BehindRank[], lagging: boolean): StackGroupNode {
  const id = `group:${jobKey(g.job_id)}:${index}:${g.ranks_text}`;
  // One line per reason: three ranks behind by the same step say it once.
  const why = [...new Set(behind.map(whyWithoutRank))];
  let description: string;
  if (why.length) {
    description = `behind: ${why.join("; ")}`;
  } else if (lagging) {
    description = `stack differs: ${stackSummary(g.frames ?? [])}`;
  } else {
    description = stackSummary(g.frames ?? []);
  }
  const frames = (g.frames ?? []).map(
    (f, i): StackFrameNode => ({
      kind: "frame",
      id: `${id}:frame:${i}`,
      frame: f,
      groupId: id,
      label: f.function,
      description: `${base(f.path)}:${f.line}`,
      tooltip: frameTooltip(f),
      library: isLibraryFrame(f),
    }),
  );
  const ranks = [...(g.ranks ?? [])].sort((a, b) => a - b);
  const tooltip = [groupLabel(g) + (g.job_id ? ` · job ${g.job_id}` : ""), ...behind.map((b) => `behind: ${behindText(b)}`), "", ...groupFrameLines(g.frames ?? [])].join("\n");
  return { kind: "group", id, group: g, label: groupLabel(g), description, tooltip, lagging, behind, ranks, frames, shown: foldLibraryRuns(frames) };
}

function unansweredNode(w: StacksWorker): StackUnansweredNode {
  const who = w.rank === null ? `pid ${w.pid}` : `rank ${w.rank}`;
  return {
    kind: "unanswered",
    id: `unanswered:${w.worker}`,
    worker: w,
    label: `${who} · no stack`,
    description: w.error ?? "no answer",
    tooltip: [`${who} · ${w.actor_class ?? w.task ?? "worker"} · pid ${w.pid} · worker ${w.worker}`, w.error ?? "", w.hint ? `hint: ${w.hint}` : ""].filter(Boolean).join("\n"),
  };
}

/** A worker listed without any thread gave no stack (it is in no group). */
function unanswered(w: StacksWorker): boolean {
  return (w.threads ?? []).length === 0;
}

/**
 * The view's roots: one node per job when the answer spans several jobs, else
 * that job's groups (and the workers that gave no stack) at the top.
 */
export function buildStackTree(result: StacksResult): (StackJobNode | StackGroupNode | StackUnansweredNode)[] {
  const jobs = new Map<string, { jobId: string | null; groups: StackGroup[]; silent: StacksWorker[]; workers: number }>();
  const jobOf = (jobId: string | null) => {
    const key = jobKey(jobId);
    let j = jobs.get(key);
    if (!j) {
      j = { jobId, groups: [], silent: [], workers: 0 };
      jobs.set(key, j);
    }
    return j;
  };
  for (const w of result.workers ?? []) {
    const j = jobOf(w.job_id);
    j.workers += 1;
    if (unanswered(w)) {
      j.silent.push(w);
    }
  }
  for (const g of result.groups ?? []) {
    jobOf(g.job_id).groups.push(g);
  }
  const behind = result.behind ?? [];
  const nodes = [...jobs.values()].map((j) => {
    const lagging = laggingGroups(j.groups, behind);
    const children: (StackGroupNode | StackUnansweredNode)[] = [
      ...j.groups.map((g, i) => groupNode(g, i, groupBehind(g, behind), lagging.has(g))),
      ...j.silent.map(unansweredNode),
    ];
    const n = j.groups.length;
    const node: StackJobNode = {
      kind: "job",
      id: `job:${jobKey(j.jobId)}`,
      jobId: j.jobId,
      label: j.jobId ? `job ${j.jobId}` : "no job",
      description: `${n} group${n === 1 ? "" : "s"} · ${j.workers} worker${j.workers === 1 ? "" : "s"}${j.silent.length ? ` · ${j.silent.length} without a stack` : ""}`,
      children,
    };
    return node;
  });
  return nodes.length === 1 ? nodes[0].children : nodes;
}

/** A node's children (frames of a group, runs of library frames folded; groups of a job). */
export function stackChildren(node: StackNode): StackNode[] {
  switch (node.kind) {
    case "job":
      return node.children;
    case "group":
      return node.shown;
    case "library":
      return node.frames;
    default:
      return [];
  }
}

/** "    function  /abs/path.py:88 | source line", as the CLI's text writes frames. */
function groupFrameLines(frames: readonly StackFrame[]): string[] {
  return frames.map((f) => `    ${f.function}  ${f.path}:${f.line}${f.code?.trim() ? ` | ${f.code.trim()}` : ""}`);
}

/** One group as text for an issue report: its label and one-line stack, why it is behind, its frames innermost first. */
export function groupText(node: StackGroupNode): string {
  const g = node.group;
  const head = `${g.job_id ? `job ${g.job_id}: ` : ""}${node.label}: ${stackSummary(g.frames ?? [])}`;
  return [head, ...node.behind.map((b) => `  behind: ${behindText(b)}`), ...groupFrameLines(g.frames ?? [])].join("\n") + "\n";
}

/** The whole answer as text: the broker's own rendering, else one block per group. */
export function resultText(result: StacksResult): string {
  if (result.text?.trim()) {
    return result.text.endsWith("\n") ? result.text : `${result.text}\n`;
  }
  const groups: StackGroupNode[] = [];
  const walk = (nodes: StackNode[]) => {
    for (const n of nodes) {
      if (n.kind === "group") {
        groups.push(n);
      } else if (n.kind === "job") {
        walk(n.children);
      }
    }
  };
  walk(buildStackTree(result));
  return groups.map(groupText).join("\n");
}

/** "12 workers in 340 ms · 2 jobs" under the view's title. */
export function resultSummary(result: StacksResult): string {
  const n = result.workers?.length ?? 0;
  const jobs = new Set((result.workers ?? []).map((w) => w.job_id ?? "")).size;
  const ms = typeof result.elapsed_ms === "number" ? ` in ${Math.round(result.elapsed_ms)} ms` : "";
  return `${n} worker${n === 1 ? "" : "s"}${ms}${jobs > 1 ? ` · ${jobs} jobs` : ""}`;
}

function within(p: string, root: string): string | undefined {
  const norm = (s: string) => s.replace(/\\/g, "/").replace(/\/+$/, "");
  const a = norm(p);
  const r = norm(root);
  if (!r) {
    return undefined;
  }
  return a === r ? "" : a.startsWith(`${r}/`) ? a.slice(r.length + 1) : undefined;
}

export interface LocalPathOptions {
  /** raySleuth.pathMappings and a configuration's own, as attach merges them. */
  mappings: readonly PathMapping[];
  /** The worker's working folder (its `cwd` in `GET /v1/workers`). */
  cwd?: string | null;
  /** The workspace folders, where a copy of the worker's cwd may be. */
  folders: readonly string[];
  exists: (p: string) => boolean;
}

/**
 * Where a worker's file is on this machine, by the rules attach uses: an explicit
 * mapping first, then the path itself, then the worker's working folder taken as a
 * copy of a workspace folder (what the broker maps by itself). Undefined: not here.
 */
export function localPath(remote: string, options: LocalPathOptions): string | undefined {
  for (const m of options.mappings) {
    const rel = within(remote, m.remoteRoot);
    if (rel !== undefined) {
      const candidate = rel ? path.join(m.localRoot, ...rel.split("/")) : m.localRoot;
      if (options.exists(candidate)) {
        return candidate;
      }
    }
  }
  if (options.exists(remote)) {
    return remote;
  }
  const rel = options.cwd ? within(remote, options.cwd) : undefined;
  if (rel) {
    for (const folder of options.folders) {
      const candidate = path.join(folder, ...rel.split("/"));
      if (options.exists(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}
