// The status bar's text for a connection status and worker list. Pure, no
// vscode import, so it is tested without a window.
import type { WorkerInfo } from "../broker/types";

export type StatusInput = {
  status: "disconnected" | "connecting" | "connected" | "reconnecting";
  workers: readonly WorkerInfo[];
};

export function statusText(state: StatusInput): string {
  switch (state.status) {
    case "connected": {
      const n = state.workers.filter((w) => w.state !== "exited").length; // the live ones
      return `Ray: ${n} worker${n === 1 ? "" : "s"}`;
    }
    case "connecting":
      return "Ray: connecting…";
    case "reconnecting":
      return "Ray: reconnecting…";
    case "disconnected":
      return "Ray: disconnected";
  }
}
