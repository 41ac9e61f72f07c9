// One made-up worker object with every field of the wire type (extension/broker/wire.ts), for
// the plain mocha tests: each test overrides only the fields it is about.
import type { WorkerInfo } from "../../../extension/broker/types";

export function makeWorker(over: Partial<WorkerInfo> = {}): WorkerInfo {
  return {
    id: "w0", pid: 100, node_id: "n1", node_ip: "10.0.0.1", job_id: "01000000", actor_id: null, actor_class: null,
    actor_name: null, task: null, rank: null, local_rank: null, world_size: null, gpu_ids: [], state: "running",
    paused_at: null, agent: true, python: "3.12.4", last_seen: 1_700_000_000, cwd: null, armed: [], crash: null,
    held_until: null, gpu_memory: null, deadlines: [], paused_since: null, deadline: null, busy: null,
    worker_group: null, roles: [], role: null,
    ...over,
  };
}
