// The broker's public HTTP objects as the extension sees them (see
// ARCHITECTURE.md, "HTTP API"). Types only: no vscode import, no logic.

export type WorkerState = "running" | "idle" | "paused" | "crashed" | "exited";

export interface PausedAt {
  path: string;
  line: number;
  reason: string;
}

/** One Ray worker process, as `GET /v1/workers` returns it. */
export interface WorkerInfo {
  /** Ray's worker id (hex). */
  id: string;
  pid: number;
  node_id: string;
  node_ip: string;
  job_id: string | null;
  actor_id: string | null;
  /** Class of the actor this worker hosts; null for a task worker. */
  actor_class: string | null;
  actor_name: string | null;
  /** Name of the task running now, if any. */
  task: string | null;
  rank: number | null;
  local_rank: number | null;
  world_size: number | null;
  gpu_ids: number[] | null;
  state: WorkerState;
  paused_at: PausedAt | null;
  /** False for workers seen only through Ray's State API (no agent inside). */
  agent: boolean;
  /** Python version of the worker, e.g. "3.12.4". */
  python: string | null;
  /** When the broker last heard of the worker (seconds since the epoch, or ISO text). */
  last_seen: number | string | null;
}

/** One Ray node, as `GET /v1/nodes` returns it. */
export interface NodeInfo {
  node_id: string;
  node_ip: string;
  alive: boolean;
  /** Number of workers on the node. */
  workers: number;
}

/** The broker's ready line, also written to `<state-dir>/broker.json`. */
export interface BrokerReadyInfo {
  ready: boolean;
  http: string;
  dap: string;
  token_file: string;
}

/** `GET /v1/status`: only the fields the extension reads. */
export interface BrokerStatus {
  /** The DAP front door, "HOST:PORT". */
  dap: string;
}

/** The body of every broker error response. */
export interface BrokerErrorBody {
  error: string;
  hint?: string;
}
