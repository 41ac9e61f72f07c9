// Pure shaping of "raysleuth" debug configurations: what a worker session is
// called, which worker a config means, session keys, path mappings and the DAP
// address. No vscode import, so it is tested without a window.
import { WorkerInfo } from "../broker/types";
import { attachable, workerLabel } from "../cluster/workerGrouping";

export interface PathMapping {
  localRoot: string;
  remoteRoot: string;
}

/** A "raysleuth" attach configuration as launch.json, the commands and the provider see it. */
export interface SleuthAttachConfig {
  type?: string;
  request?: string;
  name?: string;
  /** Ray worker id (hex). */
  worker?: string;
  rank?: number;
  job?: string;
  pathMappings?: PathMapping[];
  /** Never sent: the adapter replaces it with a single-use attach ticket (broker/tickets.ts). */
  token?: string;
  /** Filled by the adapter when it sends the attach: a single-use ticket from POST /v1/tickets. */
  ticket?: string;
  /** The workspace folder, for the broker's automatic mapping (when no pathMappings are given). */
  localRoot?: string;
  /** True for the one parent session that holds the worker sessions (served in-process). */
  cluster?: boolean;
  /** The broker's DAP front door "HOST:PORT", filled by the provider for the adapter factory. */
  __raySleuthDap?: string;
  /** The worker this session debugs, as far as the editor can tell: the key that stops a second session. */
  __raySleuthWorker?: string;
  [key: string]: unknown;
}

/** The session's name: the worker's label, e.g. "rank 2 · Learner · pid 4242". */
export function sessionName(w: WorkerInfo): string {
  return workerLabel(w);
}

/**
 * The worker a config means, by the broker's rule for ranks (docs/contract.md,
 * "DAP front door"): the paused one, else the one seen most recently.
 * Undefined when the editor cannot tell (the broker still decides the attach).
 */
export function targetWorker(config: SleuthAttachConfig, workers: readonly WorkerInfo[]): WorkerInfo | undefined {
  if (typeof config.worker === "string" && config.worker) {
    return workers.find((w) => w.id === config.worker);
  }
  if (typeof config.rank !== "number") {
    return undefined;
  }
  const candidates = workers.filter((w) => attachable(w) && w.rank === config.rank && (!config.job || w.job_id === config.job));
  const jobs = new Set(candidates.map((w) => w.job_id));
  if (candidates.length === 0 || jobs.size > 1) {
    return undefined; // unknown rank, or two jobs share it: the broker's message says which
  }
  const paused = candidates.find((w) => w.state === "paused");
  if (paused) {
    return paused;
  }
  const seen = (w: WorkerInfo) => (typeof w.last_seen === "number" ? w.last_seen : Date.parse(String(w.last_seen ?? "")) / 1000 || 0);
  return [...candidates].sort((a, b) => seen(b) - seen(a))[0];
}

/** The key that identifies a session's worker: its id when known, else its rank (and job). */
export function sessionKey(config: SleuthAttachConfig): string | undefined {
  if (config.cluster) {
    return undefined;
  }
  if (typeof config.__raySleuthWorker === "string") {
    return `worker:${config.__raySleuthWorker}`;
  }
  if (typeof config.worker === "string" && config.worker) {
    return `worker:${config.worker}`;
  }
  if (typeof config.rank === "number") {
    return `rank:${config.rank}:${config.job ?? ""}`;
  }
  return undefined;
}

/** True when the config names what to debug (a worker, a rank or a crash record). */
export function hasTarget(config: SleuthAttachConfig): boolean {
  return (typeof config.worker === "string" && config.worker !== "") || typeof config.rank === "number" || typeof config["crash"] === "string";
}

/** The config's own mappings, then those of the setting raySleuth.pathMappings (with ${workspaceFolder} filled in). */
export function mergePathMappings(own: unknown, fromSetting: unknown, workspaceFolder: string | undefined): PathMapping[] {
  const valid = (list: unknown): PathMapping[] =>
    Array.isArray(list)
      ? list.filter((m): m is PathMapping => !!m && typeof m === "object" && typeof (m as PathMapping).localRoot === "string" && typeof (m as PathMapping).remoteRoot === "string")
      : [];
  const fill = (p: string) => (workspaceFolder === undefined ? p : p.split("${workspaceFolder}").join(workspaceFolder));
  const merged = [...valid(own), ...valid(fromSetting).map((m) => ({ localRoot: fill(m.localRoot), remoteRoot: fill(m.remoteRoot) }))];
  const seen = new Set<string>();
  return merged.filter((m) => {
    const k = `${m.localRoot}\u0000${m.remoteRoot}`;
    return seen.has(k) ? false : (seen.add(k), true);
  });
}

/** "127.0.0.1:7312" or "[::1]:7312" → host and port; throws with a message naming the text. */
export function parseDapAddress(text: string): { host: string; port: number } {
  const m = /^\[?([^\]]*?)\]?:(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || !m[1] || !(port > 0 && port < 65536)) {
    throw new Error(`The broker's DAP address "${text}" is not HOST:PORT. Restart the broker ("raysleuth broker").`);
  }
  return { host: m[1], port };
}
