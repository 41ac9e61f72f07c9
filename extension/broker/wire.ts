// Generated from python_backend/raysleuth/model by scripts/gen_wire_types.py: do not edit.
// The broker's objects as docs/contract.md describes them; types only.

export type WorkerState = "running" | "idle" | "paused" | "crashed" | "exited";
export type CrashKind = "exception" | "worker_died" | "oom" | "segfault";
export type CaseKind = "crash" | "hang" | "divergence" | "memory";

/** Where a worker is paused (or held after a crash). */
export interface PausedAt {
  path: string | null;
  line: number | null;
  /** "breakpoint", "exception", "pause", "step", "crash", ... */
  reason: string | null;
}

/** A worker's GPU memory from its NVML samples (all its GPUs). */
export interface GpuMemory {
  used_bytes: number;
  peak_bytes: number;
  /** The last samples never fell and rose by 256 MiB or more. */
  growing: boolean;
}

/** A timeout that ends a worker's pause, e.g. Ray Train's health check. */
export interface PauseDeadline {
  /** When it fires (seconds since the epoch); absent in `deadlines`' entries. */
  at?: number;
  /** e.g. "Ray Train's worker health check". */
  what: string;
  seconds: number;
  /** What to raise to give a pause more time, e.g. "RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S". */
  setting: string;
}

/** What holds a worker that cannot answer: an evaluate whose C code holds its GIL (#37). */
export interface WorkerBusy {
  /** "evaluate". */
  what: string;
  /** When it started (seconds since the epoch). */
  since: number;
  expression: string;
}

/** A verl role a worker hosts (issue 38): `actor` of a `WorkerDict` or `FusedWorker_actor_critic`. */
export interface WorkerRole {
  /** The role's name as verl keys it: "actor", "critic", "actor_rollout", ... */
  name: string;
  /** The role's class, e.g. "ActorRolloutRefWorker"; null until the actor made it. */
  class_name: string | null;
}

export interface Worker {
  /** Ray's worker id (hex). */
  id: string;
  pid: number | null;
  node_id: string | null;
  node_ip: string | null;
  job_id: string | null;
  actor_id: string | null;
  actor_class: string | null;
  actor_name: string | null;
  /** Name of the task (or actor method) running now; for a verl role, the role's own method (`ActorRolloutRefWorker.update_actor`, not `WorkerDict.actor_rollout_update_actor`). */
  task: string | null;
  /** From raysleuth.set_rank(), RANK/LOCAL_RANK/WORLD_SIZE or Ray Train's context. */
  rank: number | null;
  local_rank: number | null;
  world_size: number | null;
  gpu_ids: number[];
  /** One of STATES. */
  state: WorkerState;
  /** {path, line, reason} while paused or held after a crash. */
  paused_at: PausedAt | null;
  /** False for a worker seen only through Ray's State API. */
  agent: boolean;
  python: string | null;
  last_seen: number | null;
  /** The worker's working folder (path mapping). */
  cwd: string | null;
  /** Ids of the cluster points armed in the worker now. */
  armed: string[];
  /** Id of its newest crash record. */
  crash: string | null;
  /** A crashed worker held for an attach is let go at this time. */
  held_until: number | null;
  /** {used_bytes, peak_bytes, growing} from its GPU samples. */
  gpu_memory: GpuMemory | null;
  /** While paused: [{what, seconds, setting}], the timeouts that end the pause (its agent's). */
  deadlines: PauseDeadline[];
  /** When the broker first saw it paused (this pause). */
  paused_since: number | null;
  /** While paused: the nearest of `deadlines` as {at, what, seconds, setting} (`at`: epoch s). */
  deadline: PauseDeadline | null;
  /** An evaluate whose C code holds the worker's GIL ({what, since, expression}): it answers nothing until that ends; POST /v1/workers/{id}/kill ends the worker. */
  busy: WorkerBusy | null;
  /** verl's worker group: its name prefix (`WG_PREFIX`, the head of verl's actor names `<prefix><Class>_<pg>:<local rank>`). Each group of a job has its own ranks 0..N-1. */
  worker_group: string | null;
  /** The verl roles it hosts ([{name, class_name}]; a `WorkerDict` or `FusedWorker_*` hosts several). */
  roles: WorkerRole[];
  /** The role running now (a role's name), or the only one it hosts. */
  role: string | null;
}

/** The worker as it was at a crash (the worker object's fields; older records hold fewer). */
export interface CrashWorker {
  id?: string;
  pid?: number | null;
  node_id?: string | null;
  node_ip?: string | null;
  job_id?: string | null;
  actor_id?: string | null;
  actor_class?: string | null;
  actor_name?: string | null;
  task?: string | null;
  rank?: number | null;
  local_rank?: number | null;
  world_size?: number | null;
  gpu_ids?: number[];
  cwd?: string | null;
  /** verl's worker group, the roles it hosts and the role that ran (issue 38). */
  worker_group?: string | null;
  roles?: WorkerRole[];
  role?: string | null;
}

/** One frame of a crash record, innermost first. */
export interface CrashFrame {
  path?: string;
  line?: number;
  function?: string;
  /** Name → bounded repr of each local. */
  locals?: Record<string, string>;
  /** A library's frame (verl's wrappers, Ray's executor, the standard library), not the user's: `model/frames.py`'s rule. */
  library?: boolean;
}

/** One row of `GET /v1/crashes` (newest first). */
export interface CrashSummary {
  id: string;
  /** When it happened (seconds since the epoch). */
  time: number;
  kind: CrashKind;
  exc_type: string | null;
  message: string | null;
  /** What to look at first. */
  hint: string | null;
  worker: CrashWorker;
  /** While the crashed worker is held for an attach: when it is let go. */
  held_until: number | null;
  /** The failed call is kept: `POST /v1/crashes/{id}/rerun` runs it again under the debugger. */
  can_rerun: boolean;
}

export interface CrashRecord {
  /** `<yyyymmdd-hhmmss>-<hex>`, also the file name in the state dir. */
  id: string;
  /** When it happened (seconds since the epoch). */
  time: number;
  /** One of KINDS. */
  kind: CrashKind;
  /** The worker object (the contract's fields) as it was at the crash. */
  worker: CrashWorker;
  /** Qualified exception class (`builtins.ZeroDivisionError`); None for a hard death. */
  exc_type: string | null;
  /** The exception's message, or Ray's exit detail. */
  message: string | null;
  /** What to look at first (set by the store). */
  hint: string | null;
  /** While the crashed worker is held for an attach: when it is let go. */
  held_until: number | null;
  /** [{path, line, function, locals: {name: repr}}], innermost first. */
  frames: CrashFrame[];
  /** The last GPU sample of the worker (NVML), or None. */
  gpu: Record<string, unknown> | null;
  /** At a CUDA out-of-memory error: torch's memory_summary() text, the allocator's largest live blocks and the largest CUDA tensors Python held (raysleuth/probes/gpu.py), else None. */
  cuda_memory: Record<string, unknown> | null;
  /** The fatal Ray check that aborted the process: {check (`file.h:66: Check failed: ...`), file (the log it is in, on the worker's node), text (the line and Ray's stack)}, else None. */
  ray_check: Record<string, unknown> | null;
  /** Python's faulthandler text of a native crash, or None. */
  faulthandler: string | null;
  /** The formatted traceback (bounded). */
  traceback: string | null;
  /** The exception's causes and contexts: [{exc_type, message}]. */
  chain: Record<string, unknown>[];
  /** A failed plain task, kept for "Rerun Under Debugger": {function, path, line (the first line it stops at), args (short reprs), bytes, runtime_env, resources}, or {unavailable: why not}; None for a hard death or a record from an older agent. */
  rerun: Record<string, unknown> | null;
  /** When a library re-raised the user's error as its own (Ray Data's `UserCodeException`), what the task raised (`ray.exceptions.UserCodeException: UDF failed ...`); the record names the user's error. None otherwise. */
  raised_as: string | null;
  /** The worker's last timeline events. */
  events: Record<string, unknown>[];
  /** The task or actor method running at the crash. */
  task: string | null;
  task_id: string | null;
  /** Ray's exit type of a dead worker (SYSTEM_ERROR, NODE_OUT_OF_MEMORY, ...). */
  exit_type: string | null;
  exit_detail: string | null;
  /** The worker's last heartbeat before it died. */
  last_report: Record<string, unknown> | null;
  /** How long the agent took to build the record. */
  capture_ms: number | null;
  /** Path → source text of the frames' files, for a replay where the files are not. */
  sources: Record<string, string>;
}

/** One worker that has a cluster point armed. */
export interface ArmedOn {
  worker: string;
  rank: number | null;
  pid: number | null;
}

/** One cluster point as `GET /v1/breakpoints` (and `/v1/snapshots`) list it. */
export interface PointJson {
  id: string;
  /** The file as the editor sent it (an absolute local path). */
  path: string;
  /** 1-based. */
  line: number;
  /** As written, scope prefix included, e.g. "[rank 0,2-3] step % 100 == 0". */
  condition: string | null;
  hitCondition: string | null;
  logMessage: string | null;
  ranks: number[] | null;
  /** The scope without brackets, e.g. "rank 0,2-3"; null: every worker. */
  scope: string | null;
  /** Who set it: "cli", "api", "vscode:<window>", or what a client named itself. */
  owner: string;
  /** Number of workers that have it armed now. */
  armed?: number;
  /** Which workers have it armed now, by rank. */
  armed_on?: ArmedOn[];
  /** Live workers that have not taken the set yet. */
  pending?: number;
  /** Snapshot points: the snapshot id rows are filed under. */
  snapshot?: string | null;
  /** Snapshot points: captures per worker. */
  count?: number | null;
  /** Snapshot points: when it was added. */
  created?: number | null;
  /** Snapshot points: expressions recorded at each capture. */
  expressions?: string[] | null;
}

export interface CaseSummary {
  /** `<kind>-<id of its evidence or a random hex>`. */
  id: string;
  kind: CaseKind;
  /** When it happened (seconds since the epoch). */
  time: number;
  job_id: string | null;
  /** The ranks it is about (for a divergence, those that differ). */
  ranks: number[];
  /** One line: who, what, where, when: "rank 2 raised FloatingPointError at demo.py:69 in step, step 40". */
  summary: string;
  /** What to look at first. */
  hint: string | null;
}
