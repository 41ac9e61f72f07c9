// The text of one logpoint line as the Logpoints channel and the Debug Console
// show it. Pure text, no vscode import.
import type { LogpointLine } from "../broker/types";

/** "[rank 3] loss=0.25"; a worker without a rank is named by its id. */
export function logpointText(l: Pick<LogpointLine, "rank" | "worker" | "message" | "error">): string {
  const who = l.rank === null || l.rank === undefined ? `worker ${String(l.worker).slice(0, 8)}` : `rank ${l.rank}`;
  return `[${who}] ${l.error ? "logpoint failed: " : ""}${l.message}`;
}
