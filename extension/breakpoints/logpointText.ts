// The text of one logpoint line as the Logpoints channel and the Debug Console
// show it. Pure text, no vscode import.
import type { LogpointLine } from "../broker/types";
import { oneLine } from "../common/textSafe";

/**
 * "[rank 3] loss=0.25"; a worker without a rank is named by its id. One line whatever the
 * message holds: the Debug Console renders ANSI sequences, and a newline would forge a rank (#37).
 */
export function logpointText(l: Pick<LogpointLine, "rank" | "worker" | "message" | "error">): string {
  const who = l.rank === null || l.rank === undefined ? `worker ${String(l.worker).slice(0, 8)}` : `rank ${l.rank}`;
  return oneLine(`[${who}] ${l.error ? "logpoint failed: " : ""}${l.message}`);
}
