// Pure shaping of the worker list for the Cluster view and the pickers: nodes →
// verl role / worker groups, else actor-class groups ("tasks" / "idle" for plain workers) →
// workers, the text each worker item shows, the rank and worker pick rows. No vscode import,
// so it is tested without a window.
import * as path from "path";
import { NodeInfo, WorkerInfo } from "../broker/types";
import { formatRanks } from "../common/ranks";
import { oneLine } from "../common/textSafe";

export const TASKS_GROUP = "tasks";
export const IDLE_GROUP = "idle";
/** Workers that are gone (finished jobs, killed actors): one group per node, last, collapsed. */
export const EXITED_GROUP = "exited";

export interface WorkerGroup {
  nodeId: string;
  /** The verl roles or worker group (roleGroupOf), else the actor class, TASKS_GROUP / IDLE_GROUP for workers that host no actor, or EXITED_GROUP. */
  name: string;
  workers: WorkerInfo[];
  /** The name is a verl role or worker group (issue #38), not an actor class. */
  role?: boolean;
}

export interface NodeGroup {
  nodeId: string;
  nodeIp: string;
  alive: boolean;
  groups: WorkerGroup[];
  /** Live workers (not exited). */
  workerCount: number;
  exitedCount: number;
}

/** The roles a worker hosts, "actor + critic" for a fused or colocated verl worker, else its verl worker group ("critic"); null for other workers. */
export function roleGroupOf(w: WorkerInfo): string | null {
  const roles = (w.roles ?? []).map((r) => r.name).filter(Boolean);
  return roles.length ? roles.join(" + ") : (w.worker_group ?? null);
}

/** "actor (ActorRole), critic (CriticRole)": the roles a worker hosts and their classes; null: none. */
export function rolesText(w: WorkerInfo): string | null {
  const roles = w.roles ?? [];
  return roles.length ? roles.map((r) => (r.class_name ? `${r.name} (${r.class_name})` : r.name)).join(", ") : null;
}

/** "critic 0-1 · actor 0-1": who stands somewhere, ranks by role group (each verl worker group of a job has ranks 0..N-1); null when none of them has a role. */
export function ranksByRole(workerIds: readonly string[], workers: readonly WorkerInfo[]): string | null {
  const byId = new Map(workers.map((w) => [w.id, w]));
  const groups = new Map<string, number[]>();
  let any = false;
  for (const id of workerIds) {
    const w = byId.get(id);
    const role = w ? roleGroupOf(w) : null;
    any ||= role !== null;
    const key = role ?? "other";
    const ranks = groups.get(key) ?? [];
    if (w && w.rank !== null && w.rank !== undefined) {
      ranks.push(w.rank);
    }
    groups.set(key, ranks);
  }
  if (!any) {
    return null;
  }
  const parts = [...groups].sort(([a], [b]) => a.localeCompare(b)).map(([role, ranks]) => (ranks.length ? `${role} ${formatRanks([...new Set(ranks)].sort((x, y) => x - y))}` : role));
  return oneLine(parts.join(" · "));
}

export function groupNameOf(w: WorkerInfo): string {
  if (w.state === "exited") {
    return EXITED_GROUP;
  }
  const role = roleGroupOf(w);
  if (role) {
    return role;
  }
  if (w.actor_class) {
    return w.actor_class;
  }
  return w.state === "idle" ? IDLE_GROUP : TASKS_GROUP;
}

function compareWorkers(a: WorkerInfo, b: WorkerInfo): number {
  const ra = a.rank ?? Number.POSITIVE_INFINITY;
  const rb = b.rank ?? Number.POSITIVE_INFINITY;
  if (ra !== rb) {
    return ra < rb ? -1 : 1;
  }
  return (a.pid ?? 0) - (b.pid ?? 0);
}

function groupOrder(name: string): number {
  return name === TASKS_GROUP ? 1 : name === IDLE_GROUP ? 2 : name === EXITED_GROUP ? 3 : 0;
}

/** Groups workers by node, then actor class; nodes the broker knows without workers are kept. */
export function groupWorkers(workers: readonly WorkerInfo[], nodes: readonly NodeInfo[] = []): NodeGroup[] {
  const byNode = new Map<string, NodeGroup>();
  const nodeOf = (id: string, ip: string, alive: boolean): NodeGroup => {
    let n = byNode.get(id);
    if (!n) {
      n = { nodeId: id, nodeIp: ip, alive, groups: [], workerCount: 0, exitedCount: 0 };
      byNode.set(id, n);
    }
    return n;
  };
  for (const n of nodes) {
    nodeOf(n.node_id, n.node_ip, n.alive);
  }
  for (const w of workers) {
    const node = nodeOf(w.node_id ?? "", w.node_ip ?? "", true);
    if (!node.nodeIp) {
      node.nodeIp = w.node_ip ?? "";
    }
    const name = groupNameOf(w);
    let group = node.groups.find((g) => g.name === name);
    if (!group) {
      group = { nodeId: node.nodeId, name, workers: [], ...(name !== EXITED_GROUP && roleGroupOf(w) ? { role: true } : {}) };
      node.groups.push(group);
    }
    group.workers.push(w);
    if (name === EXITED_GROUP) {
      node.exitedCount++;
    } else {
      node.workerCount++;
    }
  }
  const result = [...byNode.values()];
  for (const n of result) {
    n.groups.sort((a, b) => groupOrder(a.name) - groupOrder(b.name) || a.name.localeCompare(b.name));
    for (const g of n.groups) {
      g.workers.sort(compareWorkers);
    }
  }
  result.sort((a, b) => Number(b.alive) - Number(a.alive) || a.nodeIp.localeCompare(b.nodeIp) || a.nodeId.localeCompare(b.nodeId));
  return result;
}

export function shortId(id: string | null | undefined, n = 8): string {
  return id ? id.slice(0, n) : "-";
}

export function nodeLabel(n: NodeGroup): string {
  return oneLine(`node ${n.nodeIp || "?"} (${shortId(n.nodeId, 6)})`);
}

export function nodeDescription(n: NodeGroup): string {
  let text = `${n.workerCount} worker${n.workerCount === 1 ? "" : "s"}`;
  if (n.exitedCount) {
    text += ` · ${n.exitedCount} exited`;
  }
  return n.alive ? text : `${text} · dead`;
}

/** e.g. "rank 2 · Learner · pid 4242"; a verl worker hosting roles shows the role's method it runs ("rank 2 · critic · CriticWorker.update_critic · pid 4242"); parts that are unknown are left out. */
export function workerLabel(w: WorkerInfo): string {
  const parts: string[] = [];
  if (w.rank !== null && w.rank !== undefined) {
    parts.push(`rank ${w.rank}`);
  }
  if (w.roles?.length) {
    if (w.role && w.roles.length > 1) {
      parts.push(w.role);
    }
    parts.push(w.task ?? w.roles.map((r) => r.class_name ?? r.name).join(", "));
  } else if (w.actor_class) {
    parts.push(w.actor_class);
  } else if (w.task) {
    parts.push(w.task);
  }
  parts.push(`pid ${w.pid}`);
  return oneLine(parts.join(" · ")); // a class or task name's ESC, newline or bidi override shown escaped (#37)
}

/** How the Cluster view shows a worker beyond its own fields. */
export interface ShowOptions {
  /** The broker cannot be reached now: the last known state may be wrong (issue #13, item 5). */
  stale?: boolean;
  /** Now, in ms since the epoch (for countdowns; a parameter so tests pin it). */
  now?: number;
}

/** "9:41", "0:05", "1:02:03": seconds left, never negative. */
export function formatCountdown(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}

/** A short name of what ends a pause: "health check" for Ray Train's, "collective timeout" for torch's. */
function deadlineName(what: string): string {
  if (/health check/i.test(what)) {
    return "health check";
  }
  return /collective/i.test(what) ? "collective timeout" : what;
}

/** e.g. "health check kills it in 9:41"; null without a deadline. */
export function deadlineText(w: WorkerInfo, now: number = Date.now()): string | null {
  const d = w.state === "paused" ? w.deadline : null;
  if (!d || typeof d.at !== "number") {
    return null;
  }
  const left = d.at - now / 1000;
  const name = deadlineName(d.what);
  const verb = name === "health check" ? "kills it" : "fires";
  return left > 0 ? `${name} ${verb} in ${formatCountdown(left)}` : `${name} ran out`;
}

/** A worker as the Cluster view shows its state: "unknown" while the broker cannot be reached. */
export function shownState(w: WorkerInfo, options: ShowOptions = {}): WorkerInfo["state"] | "unknown" {
  return options.stale && w.state !== "exited" ? "unknown" : w.state;
}

/** The state as shown next to the label, e.g. "paused at train.py:42 · health check kills it in 9:41". */
export function workerDescription(w: WorkerInfo, options: ShowOptions = {}): string {
  if (shownState(w, options) === "unknown") {
    return `unknown: broker unreachable (was ${w.state})`;
  }
  let text: string = w.state;
  if (w.state === "paused" && w.paused_at) {
    text = `paused at ${path.basename(w.paused_at.path ?? "?")}:${w.paused_at.line}`;
  }
  const deadline = deadlineText(w, options.now);
  if (deadline) {
    text += ` · ${deadline}`;
  }
  if (!w.agent && w.state !== "exited") {
    text += " (no agent)"; // an exited worker cannot be debugged either way: whether it had one is noise
  }
  if (w.gpu_memory && w.state !== "exited") {
    text += ` · GPU ${formatBytes(w.gpu_memory.used_bytes)}${w.gpu_memory.growing ? " ↑" : ""}`;
  }
  return oneLine(text);
}

/** "3.5 GiB", "512 MiB", "0 B": binary units, one decimal from GiB up. */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Math.max(0, n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i >= 3 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

function gpuMemoryText(m: WorkerInfo["gpu_memory"]): string | null {
  if (!m) {
    return null;
  }
  return `${formatBytes(m.used_bytes)} (peak ${formatBytes(m.peak_bytes)}${m.growing ? ", growing" : ""})`;
}

/** Why a worker shows "(no agent)": Ray lists it, but no Ray Sleuth agent runs inside. */
export const NO_AGENT_TEXT =
  "no: Ray lists this worker, but no Ray Sleuth agent runs in it (started without RAYSLEUTH=1 or the setup hook, e.g. one of Ray's prestarted idle workers, or a job from before). It cannot be debugged; its row goes once Ray forgets it.";

/** The deadline's line in a tooltip: what ends the pause, when, and the setting that gives more time. */
function deadlineTooltip(w: WorkerInfo, now: number): string | null {
  const d = w.deadline;
  const text = deadlineText(w, now);
  if (!d || !text || typeof d.at !== "number") {
    return null;
  }
  return `${d.what} ends this pause at ${new Date(d.at * 1000).toLocaleTimeString()} (${text}); to pause longer, raise ${d.setting} (now ${d.seconds} s)`;
}

/** Every field, one per line. */
export function workerTooltip(w: WorkerInfo, options: ShowOptions = {}): string {
  const stale = shownState(w, options) === "unknown";
  const rows: [string, unknown][] = [
    ["worker", w.id],
    ["pid", w.pid],
    ["state", stale ? `unknown: the broker cannot be reached (last known: ${w.state})` : w.state],
    ["deadline", deadlineTooltip(w, options.now ?? Date.now())],
    ["paused at", w.paused_at ? `${w.paused_at.path}:${w.paused_at.line} (${w.paused_at.reason})` : null],
    ["rank", w.rank],
    ["local rank", w.local_rank],
    ["world size", w.world_size],
    ["worker group", w.worker_group],
    ["roles", rolesText(w)],
    ["role now", w.roles && w.roles.length > 1 ? w.role : null],
    ["actor class", w.actor_class],
    ["actor name", w.actor_name],
    ["actor id", w.actor_id],
    ["task", w.task],
    ["job", w.job_id],
    ["node", `${w.node_ip} (${w.node_id})`],
    ["GPUs", w.gpu_ids && w.gpu_ids.length ? w.gpu_ids.join(", ") : null],
    ["GPU memory", gpuMemoryText(w.gpu_memory)],
    ["python", w.python],
    ["agent", w.agent ? "yes" : w.state === "exited" ? null : NO_AGENT_TEXT],
    ["last seen", formatLastSeen(w.last_seen)],
  ];
  return rows
    .filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => `${k}: ${oneLine(v)}`) // one line per field: a name's newline cannot forge one
    .join("\n");
}

function formatLastSeen(v: WorkerInfo["last_seen"]): string | null {
  if (v === null || v === undefined) {
    return null;
  }
  if (typeof v === "number") {
    return new Date(v * 1000).toISOString();
  }
  return v;
}

export interface RankSummary {
  rank: number;
  /** Live workers with this rank (several when two jobs run). */
  workers: WorkerInfo[];
}

/** The ranks the cluster has now (live workers with a rank), ascending. */
export function liveRanks(workers: readonly WorkerInfo[], filter: (w: WorkerInfo) => boolean = () => true): RankSummary[] {
  const byRank = new Map<number, WorkerInfo[]>();
  for (const w of workers) {
    if (w.rank === null || w.rank === undefined || w.state === "exited" || !filter(w)) {
      continue;
    }
    byRank.set(w.rank, [...(byRank.get(w.rank) ?? []), w]);
  }
  return [...byRank]
    .sort(([a], [b]) => a - b)
    .map(([rank, ws]) => ({ rank, workers: ws.sort(compareWorkers) }));
}

/** e.g. "Trainer, RankWorker · 2 workers · 1 paused". */
export function rankDescription(r: RankSummary): string {
  const classes = [...new Set(r.workers.map((w) => roleGroupOf(w) ?? w.actor_class ?? w.task ?? "task"))];
  const paused = r.workers.filter((w) => w.state === "paused").length;
  return oneLine([classes.join(", "), r.workers.length > 1 ? `${r.workers.length} workers` : "", paused ? `${paused} paused` : ""].filter(Boolean).join(" · "));
}

/** Workers a session can attach to: an agent inside and not gone. */
export function attachable(w: WorkerInfo): boolean {
  return w.agent && w.state !== "exited";
}

export interface WorkerPickItem {
  label: string;
  description: string;
  detail: string;
  workerId: string;
}

/** Quick-pick rows for raySleuth.pickWorker: paused workers first, then by rank and pid. */
export function workerPickItems(workers: readonly WorkerInfo[]): WorkerPickItem[] {
  return workers
    .filter(attachable)
    .sort(
      (a, b) =>
        Number(b.state === "paused") - Number(a.state === "paused") ||
        (a.rank ?? Number.POSITIVE_INFINITY) - (b.rank ?? Number.POSITIVE_INFINITY) ||
        (a.pid ?? 0) - (b.pid ?? 0),
    )
    .map((w) => ({
      label: workerLabel(w),
      description: workerDescription(w),
      detail: oneLine(`node ${w.node_ip} · job ${w.job_id ?? "-"} · worker ${w.id.slice(0, 12)}`),
      workerId: w.id,
    }));
}
