// Single-use attach tickets (issue #37): what a DAP attach carries instead of the broker's token,
// so that whoever receives an attach gets nothing reusable. `POST /v1/tickets` with the bearer
// token and the attach's target ({} | {worker} | {rank, job?} | {crash}) answers
// {"ticket": "<64 hex>", "expires_in": 60, "single_use": true}. No vscode import.
import type { BrokerClient } from "./brokerClient";

type Requester = Pick<BrokerClient, "requestJson">;

export type TicketTarget = { worker: string } | { rank: number; job?: string } | { crash: string } | Record<string, never>;

export interface TicketReply {
  ticket: string;
  expires_in: number;
  single_use: boolean;
}

/** Longest worker, crash or job id a ticket may name (the broker's MAX_ID_CHARS). */
const MAX_ID_CHARS = 128;

/**
 * The target to bind a ticket to: exactly what the attach's arguments name among worker, rank,
 * job and crash (the broker refuses a ticket whose target differs from the attach's), or {} (a
 * ticket for any target) when they name a mix no single ticket target can be (worker and rank).
 */
export function ticketTarget(args: Record<string, unknown>): TicketTarget {
  const named = (["worker", "rank", "job", "crash"] as const).filter((k) => args[k] !== undefined && args[k] !== null);
  const id = (v: unknown): v is string => typeof v === "string" && v.length > 0 && v.length <= MAX_ID_CHARS;
  const rank = args.rank;
  const key = named.join(",");
  if (key === "crash" && id(args.crash)) {
    return { crash: args.crash };
  }
  if (key === "worker" && id(args.worker)) {
    return { worker: args.worker };
  }
  if ((key === "rank" || key === "rank,job") && typeof rank === "number" && Number.isInteger(rank) && rank >= 0) {
    return key === "rank" ? { rank } : id(args.job) ? { rank, job: args.job } : {};
  }
  return {};
}

/** A fresh ticket for one attach to `target`; rejects (BrokerError) when the broker gives none. */
export async function createTicket(client: Requester, target: TicketTarget): Promise<string> {
  const reply = await client.requestJson<Partial<TicketReply>>("POST", "/v1/tickets", target);
  if (typeof reply?.ticket !== "string" || !/^[0-9a-f]{64}$/.test(reply.ticket)) {
    throw new Error(`the broker's answer to POST /v1/tickets has no ticket (${JSON.stringify(reply).slice(0, 200)}); is the broker older than this extension?`);
  }
  return reply.ticket;
}

/** An attach's arguments with the ticket in and no token: the token never rides DAP. */
export function withTicket(args: Record<string, unknown>, ticket: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...args, ticket };
  delete out.token;
  return out;
}
