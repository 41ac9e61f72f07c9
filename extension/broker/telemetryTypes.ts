// The broker's objects for tensors across ranks, GPU memory over time and the
// timeline (issue 14), as the extension sees them: `GET /v1/inspect`, snapshot
// values, `GET /v1/gpu` and the `gpu` stream event, `GET /v1/events`. Types only.
import type { CrashSummary } from "./wire";
/**
 * One summary of a value as the workers compute it (raysleuth/model/tensors.py): a tensor,
 * array or number entry (statistics), a short repr (`value`), or an `error`. Rows of
 * `GET /v1/inspect` and the `values` of a snapshot row; flagged across ranks by the broker.
 */
export interface TensorSummary {
  /** The entry: the inspect name or expression, or "model.fc.weight" of a collection. */
  name: string;
  /** Snapshot values: the expression this entry came from. */
  expression?: string;
  shape?: number[] | null;
  dtype?: string | null;
  device?: string | null;
  numel?: number | null;
  mean?: number | null;
  std?: number | null;
  min?: number | null;
  max?: number | null;
  norm?: number | null;
  nan?: number | null;
  inf?: number | null;
  /** Content hash: equal only for equal data. */
  hash?: string | null;
  /** A value that is no tensor or number: its short repr. */
  value?: string;
  /** Why there are no statistics (or the expression raised). */
  error?: string;
  /** Entries of a collection left out past the broker's limit. */
  more?: number;
  /** Set by the broker: this rank differs from the majority, and why. */
  differs?: boolean;
  why?: string | null;
}

/** One row of `GET /v1/inspect`: one rank's summary of one entry at one step. */
export interface InspectRow extends TensorSummary {
  rank: number | null;
  worker: string;
  pid?: number | null;
  step: number | string | null;
  /** When the rank recorded it (seconds since the epoch). */
  time: number;
}

/** The query of `GET /v1/inspect`: a name (or entry), a step ("all": every kept step; absent: the latest), rtol. */
export interface InspectQuery {
  name?: string;
  step?: string;
  rtol?: number;
}

/** One sample of one GPU of one worker, as `GET /v1/gpu` lists them. */
export interface GpuSample {
  /** Seconds since the epoch. */
  t: number;
  gpu: number | null;
  uuid?: string | null;
  /** What this worker process holds on the GPU (NVML). */
  used_bytes: number | null;
  /** The whole device's use, every process together. */
  device_used_bytes?: number | null;
  total_bytes?: number | null;
  torch_allocated?: number | null;
  torch_max_allocated?: number | null;
  /** What torch's caching allocator holds (allocated + cached free). */
  torch_reserved?: number | null;
  /** Reserved by torch's allocator but free (its cache). */
  torch_cached_free?: number | null;
  /** The process's NVML memory that is not torch's: CUDA context, NCCL buffers, other libraries. */
  not_torch_bytes?: number | null;
}

/** One worker's GPU history (`GET /v1/gpu`, and the `gpu` stream event with its newest samples). */
export interface GpuRow {
  worker: string;
  rank: number | null;
  peak_bytes: number;
  /** The last samples never fell and rose by 256 MiB or more. */
  growing: boolean;
  samples: GpuSample[];
}

/** One entry of the cluster's timeline (`GET /v1/events`): `raysleuth.event()`, crashes, inspect points, hangs, stops. */
export interface TimelineEvent {
  seq: number;
  /** Seconds since the epoch. */
  time: number;
  name: string;
  rank: number | null;
  worker: string | null;
  pid: number | null;
  fields: Record<string, unknown>;
}

/** One row of `GET /v1/crashes` (newest first), generated from the Python model. */
export type CrashRecordSummary = CrashSummary;
