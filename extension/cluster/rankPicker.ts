// Asks which ranks a command acts on: a multi-pick of the ranks the cluster has
// now, or, when no worker has a rank yet, a typed list like "0,2-3".
import * as vscode from "vscode";
import { formatRanks, parseRanks } from "../common/ranks";
import { ClusterState } from "./clusterState";
import { liveRanks, rankDescription } from "./workerGrouping";
import { WorkerInfo } from "../broker/types";

export interface RankPickOptions {
  title: string;
  placeHolder: string;
  /** Ranks ticked at the start. */
  preselect?: readonly number[];
  /** Only ranks with a worker that passes (e.g. running ones, for pause). */
  filter?: (w: WorkerInfo) => boolean;
}

interface RankItem extends vscode.QuickPickItem {
  rank: number;
}

/** The picked ranks ([] when none was ticked); undefined when cancelled. */
export async function pickRanks(state: ClusterState, options: RankPickOptions): Promise<number[] | undefined> {
  const ranks = liveRanks(state.workers, options.filter);
  if (ranks.length === 0) {
    const typed = await vscode.window.showInputBox({
      title: options.title,
      prompt: "No worker has a rank yet. Type ranks like 0,2-3 (empty: none).",
      value: options.preselect?.length ? formatRanks(options.preselect) : "",
      validateInput: (v) => (v.trim() === "" || parseRanks(v) ? undefined : "Write ranks like 0 or 0,2-3"),
    });
    return typed === undefined ? undefined : (parseRanks(typed) ?? []);
  }
  const items: RankItem[] = ranks.map((r) => ({
    label: `rank ${r.rank}`,
    description: rankDescription(r),
    picked: options.preselect?.includes(r.rank) ?? false,
    rank: r.rank,
  }));
  // Ranks already in the scope but with no live worker stay pickable (ticked), or confirming would drop them.
  for (const rank of options.preselect ?? []) {
    if (!items.some((i) => i.rank === rank)) {
      items.push({ label: `rank ${rank}`, description: "no live worker now", picked: true, rank });
    }
  }
  items.sort((a, b) => a.rank - b.rank);
  const picked = await vscode.window.showQuickPick(items, { title: options.title, placeHolder: options.placeHolder, canPickMany: true });
  return picked?.map((i) => i.rank);
}
