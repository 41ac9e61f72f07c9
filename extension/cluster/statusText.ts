// The status bar's text for a connection status and worker list. Pure, no
// vscode import, so it is tested without a window.
import type { WorkerInfo } from "../broker/types";

export type StatusInput = {
  status: "disconnected" | "connecting" | "connected" | "reconnecting";
  workers: readonly WorkerInfo[];
  /** When the broker stopped answering (ms since the epoch), while reconnecting. */
  lostSince?: number;
};

/** How long a lost broker is "reconnecting…" before the status bar says it is unreachable. */
export const UNREACHABLE_AFTER_MS = 15_000;

export function statusText(state: StatusInput, now = Date.now()): string {
  switch (state.status) {
    case "connected": {
      const n = state.workers.filter((w) => w.state !== "exited").length; // the live ones
      return `Ray: ${n} worker${n === 1 ? "" : "s"}`;
    }
    case "connecting":
      return "Ray: connecting…";
    case "reconnecting":
      return state.lostSince !== undefined && now - state.lostSince >= UNREACHABLE_AFTER_MS ? "Ray: broker unreachable, retrying" : "Ray: reconnecting…";
    case "disconnected":
      return "Ray: disconnected";
  }
}
