// What the evaluate panel decides about the broker's answers (issue 37), with no
// vscode import: whether a refusal may be overridden with `force` (the broker's
// 400 for an expression its unbounded check flags), and which rows name a worker
// an evaluate holds busy, to offer ending it.
import { BrokerError } from "../broker/brokerErrors";
import type { EvaluateResult } from "../broker/types";
import type { WorkerBusy } from "../broker/wire";

/** An evaluate row as the broker sends it, `busy` when its worker is held (C code holds its GIL). */
export type EvaluateAnswer = EvaluateResult & { busy?: WorkerBusy | null };

/** The broker's refusal of an expression that may never finish, which `force: true` overrides; else undefined. */
export function forceableRefusal(err: unknown): { error: string; hint: string } | undefined {
  if (!(err instanceof BrokerError) || err.kind !== "http" || err.status !== 400 || !err.hint) {
    return undefined;
  }
  if (!err.hint.includes('"force": true')) {
    return undefined;
  }
  return { error: err.brokerError ?? err.message, hint: err.hint };
}

/** The rows whose worker an evaluate holds: what "End worker" is offered for. */
export function busyRows(rows: readonly EvaluateAnswer[]): { worker: string; rank: number | null; busy: WorkerBusy }[] {
  return rows.filter((r) => r.busy).map((r) => ({ worker: r.worker, rank: r.rank, busy: r.busy as WorkerBusy }));
}

/** "rank 0 (3f2a9c1b) is busy: an evaluate since 12:03:04 holds it (sum(range(10**12)))". */
export function busyText(row: { worker: string; rank: number | null; busy: WorkerBusy }): string {
  const who = row.rank === null ? `worker ${row.worker.slice(0, 8)}` : `rank ${row.rank} (${row.worker.slice(0, 8)})`;
  const since = new Date(row.busy.since * 1000).toLocaleTimeString();
  const expr = row.busy.expression.length > 60 ? `${row.busy.expression.slice(0, 60)}…` : row.busy.expression;
  return `${who} is busy: an evaluate since ${since} holds it in C code (${expr}); nothing in it runs until that ends`;
}

/** The body of `POST /v1/evaluate`. */
export function evaluateBody(expression: string, ranks: number[] | undefined, force: boolean): Record<string, unknown> {
  return { expression, ...(ranks ? { ranks } : {}), ...(force ? { force: true } : {}) };
}
