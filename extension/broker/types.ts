// The broker's public HTTP objects as the extension sees them (see
// docs/contract.md, "HTTP API"). Types only: no vscode import, no logic.
import type { TensorSummary } from "./telemetryTypes";

export * from "./telemetryTypes";
export * from "./stacksTypes";

import type { PointJson, Worker } from "./wire";

export type { ArmedOn, CaseKind, CaseSummary, CrashFrame, CrashKind, CrashRecord, CrashSummary, CrashWorker, GpuMemory, PausedAt, PauseDeadline, PointJson, Worker, WorkerState } from "./wire";

/** One Ray worker process, as `GET /v1/workers` returns it (generated from the Python model). */
export type WorkerInfo = Worker;

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
  /** The Ray cluster's GCS address the broker is on, e.g. "127.0.0.1:6379". */
  ray_address?: string | null;
  /** The broker's own interpreter (it has raysleuth): the language server's first choice. */
  python?: string | null;
}

/** `GET /v1/status`: only the fields the extension reads. */
export interface BrokerStatus {
  /** The DAP front door, "HOST:PORT". */
  dap: string;
  /** The HTTP port takes DAP sessions too (one tunnelled port reaches a remote broker). */
  dap_on_http?: boolean;
  /** When this broker started (seconds since the epoch): a restarted broker has a new one. */
  started?: number;
}

/** The body of every broker error response. */
export interface BrokerErrorBody {
  error: string;
  hint?: string;
}

/** One breakpoint of the cluster set, as `GET /v1/breakpoints` and `PUT /v1/breakpoints` answer it. */
export type ClusterBreakpoint = PointJson;

/** One editor breakpoint in the body of `PUT /v1/breakpoints`. */
export interface BreakpointSpec {
  /** 1-based. */
  line: number;
  condition?: string;
  hitCondition?: string;
  logMessage?: string;
  ranks?: number[];
  /** With no rank scope: only rank 0 of each job stops, and workers without a rank (raySleuth.plainBreakpoints). */
  firstRank?: boolean;
}

/** The body of `PUT /v1/breakpoints`: one owner's whole set in one file (empty: clear it). */
export interface FileBreakpoints {
  path: string;
  /** Whose points these are; the PUT replaces only that owner's (absent: "api"). */
  owner?: string;
  /** The workspace folder holding the file, so workers with another checkout location match by relative path. */
  root?: string;
  breakpoints: BreakpointSpec[];
}

/** The answer of `PUT /v1/breakpoints`: the owner's points in the file, as now set. */
export interface FileBreakpointsReply {
  path: string;
  owner?: string;
  breakpoints: ClusterBreakpoint[];
}

/** One parsed event of the broker's stream (`workers`, `breakpoints`, `log`, `snapshot`, `crash`, ...). */
export interface StreamEvent {
  event: string;
  data: unknown;
}

/** Which workers a cluster command acts on; all absent: every paused one. */
export interface WorkerSelector {
  ranks?: number[];
  workers?: string[];
  /** A rank group's name (GET /v1/groups): its live members now. */
  group?: string;
}

/** A rank group as `GET /v1/groups` lists it: `workers` are its live members now. */
export interface RankGroup {
  name: string;
  ranks: number[];
  workers: string[];
  job_id: string | null;
  expression: string | null;
}

/** The answer of `POST /v1/step`: who stopped again within the bound, who still runs and why. */
export interface StepReply {
  stepped: { worker: string; rank: number | null; paused_at?: unknown }[];
  running: { worker: string; rank: number | null; reason: string }[];
  skipped: SkippedWorker[];
}

/** A worker a continue or pause left alone, and why (e.g. "paused in breakpoint(), waiting for a debugger"). */
export interface SkippedWorker {
  worker: string;
  reason: string;
}

/** The answer of `POST /v1/continue`. */
export interface ContinueReply {
  continued: string[];
  skipped?: SkippedWorker[];
  /** Pending pauses (see PauseReply.pending) this continue called off. */
  cancelled?: string[];
}

/** The answer of `POST /v1/pause`. */
export interface PauseReply {
  paused: string[];
  /** Asked, but its main thread is in native code: it pauses when it returns to Python. */
  pending?: SkippedWorker[];
  skipped?: SkippedWorker[];
}

/** `GET /v1/settings`, its PUT and the `settings` stream event. */
export interface BrokerSettings {
  /** When one rank of a job stops, the broker pauses the job's other ranks. */
  all_stop: boolean;
}

/** The answer of `GET /v1/workers/{id}/logs`: one byte range of the worker's stdout or stderr. */
export interface WorkerLogChunk {
  worker: string;
  stream: "out" | "err";
  /** The log file on the worker's node. */
  path: string;
  offset: number;
  /** Ask again from here to follow. */
  next_offset: number;
  size: number;
  data: string;
}

/** One row of `POST /v1/evaluate`: a value (repr) or an error, per paused worker. */
export interface EvaluateResult {
  rank: number | null;
  worker: string;
  value?: string;
  error?: string;
  /** A tensor's or array's statistics and hash: what the ranks are compared on. */
  summary?: TensorSummary;
}

/** The body of `POST /v1/snapshots`. */
export interface SnapshotRequest {
  path: string;
  /** 1-based. */
  line: number;
  condition?: string;
  ranks?: number[];
  count?: number;
  root?: string;
  /** Python expressions evaluated in the frame, each recorded as a summary (tensors) or a short repr, compared across ranks. */
  expressions?: string[];
}

export interface SnapshotFrame {
  path: string;
  line: number;
  function: string;
  /** Local name → repr. */
  locals: Record<string, string>;
}

/** One capture of one worker, as `GET /v1/snapshots/{id}` lists them. */
export interface SnapshotRow {
  rank: number | null;
  worker: string;
  /** Seconds since the epoch, or ISO text. */
  time: number | string;
  /** Innermost frame first. */
  frames: SnapshotFrame[];
  /** The point's expressions in this capture, one row per tensor entry (GET flags them across workers). */
  values?: TensorSummary[];
  /** One of `values` differs from the other workers' (GET only). */
  differs?: boolean;
}

/** One snapshot point, as `GET /v1/snapshots` lists them. */
export interface SnapshotSummary {
  id: string;
  path: string;
  line: number;
  ranks: number[] | null;
  count: number | null;
  /** Rows captured so far. */
  rows: number;
  /** Workers that have the point armed now. */
  armed?: number;
  expressions?: string[] | null;
}

/** Data of the `snapshot` stream event. */
export interface SnapshotEvent {
  id: string;
  row: SnapshotRow;
}

/** Data of the `log` stream event: one line printed by a logpoint. */
export interface LogpointLine {
  rank: number | null;
  worker: string;
  pid: number;
  path: string;
  line: number;
  message: string;
  time: number | string;
  /** True when the line reports a failure of the point itself (a condition or message that raised). */
  error?: boolean;
}
