// The hang radar's HTTP objects (GET /v1/stacks, the watch, the `hang` event), as
// the extension sees them (docs/contract.md). Types only: re-exported by types.ts.

/** One frame of a stack, as `GET /v1/stacks` lists it. */
export interface StackFrame {
  /** The file as the worker sees it. */
  path: string;
  /** 1-based. */
  line: number;
  function: string;
  /** The source line, when the worker could read it. */
  code: string | null;
  /** A library's frame (verl's dispatch wrappers, Ray's executor, the standard library), not the user's; set by the broker (issue #38). */
  library?: boolean;
}

export interface StackThread {
  name: string;
  id: number;
  main: boolean;
  /** Innermost first. */
  frames: StackFrame[];
}

/** One worker's answer in `GET /v1/stacks`. */
export interface StacksWorker {
  worker: string;
  rank: number | null;
  pid: number;
  node_id: string;
  job_id: string | null;
  actor_class: string | null;
  task: string | null;
  /** Who took the stack: the worker's agent, or py-spy run by the node's relay; null: nobody could. */
  source: "agent" | "py-spy" | null;
  /** Why there is no stack (e.g. no answer within the deadline). */
  error: string | null;
  /** What to do about the error (e.g. allow ptrace). */
  hint: string | null;
  /** The last `step` of raysleuth.event() seen from this worker. */
  step: number | null;
  threads: StackThread[];
}

/** Workers of one job whose main-thread stacks match frame for frame. */
export interface StackGroup {
  job_id: string | null;
  ranks: number[];
  /** The ranks as text, e.g. "0-2,4-7". */
  ranks_text: string;
  /** Worker ids. */
  workers: string[];
  count: number;
  /** The shared main-thread frames, innermost first. */
  frames: StackFrame[];
  /** The group stands apart: smaller than the job's largest group. */
  minority: boolean;
}

/** Where one rank is in one process group's collectives (torch's flight recorder). */
export interface CollectiveState {
  group: string;
  rank: number;
  worker: string;
  seq: number;
  op: string;
  state: string;
}

/** A rank that holds the others back, and why (e.g. "rank 3 last entered #118; ranks 0-2 wait in gloo:all_reduce #119"). */
export interface BehindRank {
  rank: number | null;
  worker: string;
  why: string;
}

/** The answer of `GET /v1/stacks`, and the data of the `stacks` stream event. */
export interface StacksResult {
  /** Seconds since the epoch. */
  time: number;
  elapsed_ms: number;
  workers: StacksWorker[];
  groups: StackGroup[];
  collectives: CollectiveState[];
  behind: BehindRank[];
  /** The grouped view as plain text (what `raysleuth stacks` prints). */
  text: string;
  /** With `tree`: one root per job (a single root when `job` was given). */
  tree?: ParallelStackNode[] | ParallelStackNode | null;
}

/** Which workers `GET /v1/stacks` asks; all absent: every live worker. */
export interface StacksQuery {
  job?: string;
  ranks?: number[];
  workers?: string[];
  /** Native frames too (py-spy's --native). */
  native?: boolean;
  /** Seconds the broker waits for the workers' answers. */
  timeout?: number;
  /** Add the parallel stack tree (issue 27). */
  tree?: boolean;
}

/** One node of the parallel stack tree (`GET /v1/stacks?tree=1`): a frame and the ranks in or below it. */
export interface ParallelStackNode {
  function: string;
  path: string | null;
  line: number | null;
  ranks: number[];
  workers: string[];
  /** The ranks part here: more than one child. */
  branch: boolean;
  children: ParallelStackNode[];
  /** A leaf of library frames the innermost user frame called (`frames`, outermost first); false on a user frame (issue #38). */
  library?: boolean;
  /** The library frames between the parent node and this one, outermost first (verl's wrappers, Ray's executor). */
  via?: StackFrame[];
  /** On a library leaf: its frames, outermost first. */
  frames?: StackFrame[];
  /** On a root: its job. */
  job_id?: string | null;
}

/** `GET /v1/stacks/watch` and the answer of its PUT. */
export interface StacksWatchStatus {
  on: boolean;
  /** Seconds between samples. */
  interval: number;
  /** Equal samples in a row that make a suspected hang. */
  samples: number;
  /** What one sample costs, in ms (null before the first). */
  cost_ms: number | null;
  /** Samples taken and hangs raised since the watch started. */
  taken?: number;
  hangs?: number;
  /** Why the last sample failed, if it did. */
  error?: string | null;
}

/** The body of `PUT /v1/stacks/watch`. */
export interface StacksWatchRequest {
  interval?: number;
  samples?: number;
}

/** Data of the `hang` stream event: a job whose ranks showed the same stacks for `samples` samples. */
export interface HangEvent {
  job_id: string | null;
  ranks_text: string;
  /** Seconds since the epoch when the stacks stopped changing. */
  since: number;
  samples: number;
  /** The job's ranks that hold the others back. */
  behind?: BehindRank[];
  /** The job's grouped stacks as text. */
  text: string;
}
