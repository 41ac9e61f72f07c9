// Pure shaping of the collectives queue (issue 27, GET /v1/collectives) for the Collectives view:
// per process group, each rank's last collective enqueued, started and completed; the rank the
// others wait for marked. No vscode import.

/** One row of `GET /v1/collectives`. */
export interface CollectiveRow {
  group: string;
  rank: number | null;
  group_rank?: number | null;
  worker: string;
  last_enqueued: number | null;
  last_started: number | null;
  last_completed: number | null;
  op: string | null;
  state: string | null;
  behind: boolean;
}

export interface CollectiveItem {
  id: string;
  label: string;
  description: string;
  tooltip: string;
  behind: boolean;
  /** A group's rows (empty for a row). */
  children: CollectiveItem[];
  /** The row's worker (a row only). */
  worker?: string;
}

function seq(v: number | null | undefined): string {
  return v === null || v === undefined || v < 0 ? "-" : `#${v}`;
}

/** Group nodes (in the broker's order) with one child per rank, the ranks behind first said. */
export function collectiveItems(rows: readonly CollectiveRow[]): CollectiveItem[] {
  const groups = new Map<string, CollectiveRow[]>();
  for (const r of rows) {
    groups.set(r.group, [...(groups.get(r.group) ?? []), r]);
  }
  return [...groups].map(([group, members]) => {
    const behind = members.filter((m) => m.behind);
    const who = (m: CollectiveRow) => (m.rank === null ? `pid-less worker ${m.worker.slice(0, 8)}` : `rank ${m.rank}`);
    const children = members.map((m) => ({
      id: `collective:${group}:${m.worker}`,
      label: `${who(m)}${m.behind ? " · behind" : ""}`,
      description: `enqueued ${seq(m.last_enqueued)} · started ${seq(m.last_started)} · completed ${seq(m.last_completed)} · ${m.op ?? "?"}`,
      tooltip: `${who(m)} in process group ${group}: ${m.state ?? "?"} ${m.op ?? ""}${m.behind ? "\nThe others wait for it: its last collective is older than theirs." : ""}`,
      behind: m.behind,
      children: [],
      worker: m.worker,
    }));
    return {
      id: `collective-group:${group}`,
      label: `process group ${group}`,
      description: `${members.length} rank${members.length === 1 ? "" : "s"}${behind.length ? ` · ${behind.map(who).join(", ")} behind` : " · in step"}`,
      tooltip: `The newest collective of each rank in process group ${group}, from torch's flight recorder.`,
      behind: behind.length > 0,
      children,
    };
  });
}
