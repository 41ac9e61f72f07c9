// "Rerun Under Debugger" on a crash record (issue 26): the broker runs the failed task's call
// again as a new task stopped at its function's first line (POST /v1/crashes/{id}/rerun), and a
// debug session attaches to the paused worker, so the user steps to the raise.
import type * as vscode from "vscode";
import { log } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import type { BrokerAccess } from "../broker/brokerConnection";
import type { WorkerInfo } from "../broker/types";

/** The broker waits up to 60 s for the rerun to reach its first line (a worker may have to start). */
const RERUN_TIMEOUT_MS = 90_000;

/** What `POST /v1/crashes/{id}/rerun` answers. */
export interface RerunReply {
  rerun: string;
  crash: string;
  function: string | null;
  args: string[];
  worker: string;
  pid: number | null;
  job_id: string;
  paused_at: { path?: string; line?: number } | null;
  note: string;
}

/** raySleuth.rerunCrash: on a Crashes view row, a case, or a crash id. */
export async function rerunCrash(
  broker: BrokerAccess,
  attach: (worker: WorkerInfo) => Promise<vscode.DebugSession | undefined>,
  target: unknown,
): Promise<vscode.DebugSession | undefined> {
  const id = typeof target === "string" ? target : (target as { id?: string } | undefined)?.id;
  const client = id ? await broker.ensureClient() : undefined;
  if (!id || !client) {
    return undefined;
  }
  try {
    const reply = await vsapi.withProgress(`Ray Sleuth: running crash ${id}'s task again, to stop at its first line…`, () =>
      client.requestJson<RerunReply>("POST", `/v1/crashes/${encodeURIComponent(id)}/rerun`, {}, RERUN_TIMEOUT_MS),
    );
    log.info(`Rerun ${reply.rerun} of crash ${id}: ${reply.function}(${reply.args.join(", ")}) stopped in worker ${reply.worker} (${reply.note})`);
    const worker = (await client.getWorkers()).find((w) => w.id === reply.worker);
    if (!worker) {
      throw new Error(`the rerun's worker ${reply.worker.slice(0, 8)} is not listed any more`);
    }
    const session = await attach(worker);
    void vsapi.showInformationMessage(`Ray Sleuth: ${reply.function ?? "the task"} runs again, stopped at its first line with the failed call's arguments. Step or Continue to reach the raise.`);
    return session;
  } catch (err) {
    void vsapi.showErrorMessage(`Ray Sleuth: rerun of crash ${id} failed: ${err instanceof Error ? err.message : String(err)}`);
    return undefined;
  }
}
