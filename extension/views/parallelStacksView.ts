// The Parallel Stacks view (issue 27): every rank's main-thread stack merged into one tree per job
// (GET /v1/stacks?tree=1); a click opens the frame's source, a hover lists the ranks and their
// states, "Make Rank Group…" on a node makes a group of its ranks (PUT /v1/groups/{name}), and
// Continue/Pause Group act on one.
import * as vscode from "vscode";
import { PARALLEL_STACKS_VIEW_ID } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { BrokerConnectionService } from "../broker/brokerConnection";
import type { WorkerSelector } from "../broker/types";
import { showReport } from "../breakpoints/clusterControl";
import { continueReport, pauseReport } from "../breakpoints/controlReport";
import { formatRanks } from "../common/ranks";
import { ClusterState } from "../cluster/clusterState";
import { ranksByRole, roleGroupOf } from "../cluster/workerGrouping";
import { ParallelItem, parallelItems, rootsOf } from "./parallelTree";
import { safeTreeTexts } from "../common/textSafe";

export class ParallelStacksService implements vscode.TreeDataProvider<ParallelItem>, vscode.Disposable {
  readonly treeView: vscode.TreeView<ParallelItem>;
  roots: ParallelItem[] = [];
  private readonly changed = new vscode.EventEmitter<ParallelItem | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly connection: BrokerConnectionService,
    private readonly state: ClusterState,
  ) {
    this.treeView = vsapi.createTreeView<ParallelItem>(PARALLEL_STACKS_VIEW_ID, { treeDataProvider: this, showCollapseAll: true });
    this.disposables.push(this.treeView, this.changed);
  }

  /** raySleuth.showParallelStacks: take the stacks now and show the tree. */
  async refresh(): Promise<ParallelItem[]> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return [];
    }
    try {
      const result = await client.getStacks({ tree: true });
      this.roots = parallelItems(rootsOf(result), this.state.workers);
      this.treeView.message = this.roots.length ? undefined : "No worker stands in Python code now.";
      this.changed.fire(undefined);
      return this.roots;
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: taking the parallel stacks failed: ${err instanceof Error ? err.message : String(err)}`);
      return [];
    }
  }

  /** raySleuth.makeRankGroup on a node: a named group of its ranks. */
  async makeGroup(item: ParallelItem | undefined, name?: string): Promise<string | undefined> {
    const ranks = item?.node.ranks ?? [];
    const client = await this.connection.ensureClient();
    if (!client || !ranks.length) {
      return undefined;
    }
    const chosen =
      name ??
      (await vscode.window.showInputBox({
        title: "Ray Sleuth: Make Rank Group",
        prompt: `A name for the group of ranks ${ranks.join(",")} (letters, digits, _ . : -)`,
        validateInput: (v) => (/^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$/.test(v.trim()) ? undefined : "Letters, digits, _ . : -; a letter first"),
      }))?.trim();
    if (!chosen) {
      return undefined;
    }
    // verl's worker groups of one job each have ranks 0..N-1 (issue #38): where the node's workers
    // have roles, its ranks would reach the same ranks of the other roles too, so name the workers.
    const ids = new Set(item?.node.workers ?? []);
    const byRole = this.state.workers.some((w) => ids.has(w.id) && roleGroupOf(w) !== null);
    const body = byRole ? { workers: [...ids] } : { ranks, ...(item?.node.job_id ? { job_id: item.node.job_id } : {}) };
    try {
      await client.requestJson("PUT", `/v1/groups/${encodeURIComponent(chosen)}`, body);
      log.info(`Rank group ${chosen}: ranks ${ranks.join(",")}`);
      void vsapi.showInformationMessage(`Ray Sleuth: group "${chosen}" is ranks ${ranks.join(",")}; Continue or Pause it from the Parallel Stacks view.`);
      return chosen;
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: making the group failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
  }

  /** raySleuth.continueGroup / pauseGroup: on a node's workers, or a group picked by name; says what it did. */
  async actOnGroup(what: "continue" | "pause", item?: ParallelItem): Promise<unknown> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    let selector: WorkerSelector;
    let asked: string;
    if (item) {
      // The node's own workers: its ranks alone would reach the same ranks of every other job.
      selector = { workers: item.node.workers };
      asked = `with rank ${formatRanks(item.node.ranks)} here`;
    } else {
      const groups = await client.requestJson<{ name: string; ranks: number[] }[]>("GET", "/v1/groups");
      const pick = await vscode.window.showQuickPick(
        groups.map((g) => ({ label: g.name, description: `ranks ${g.ranks.join(",") || "none"}` })),
        { title: `Ray Sleuth: ${what === "continue" ? "Continue" : "Pause"} Group` },
      );
      if (!pick) {
        return undefined;
      }
      selector = { group: pick.label };
      asked = `of group ${pick.label}`;
    }
    try {
      if (what === "pause") {
        const reply = await client.pauseWorkers(selector);
        showReport(pauseReport(reply, asked, this.state.workers));
        return reply;
      }
      const reply = await client.continueWorkers(selector);
      showReport(continueReport(reply, this.state.workers));
      return reply;
    } catch (err) {
      swallow(`${what} on a group failed`, err);
      void vsapi.showErrorMessage(`Ray Sleuth: ${what} failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
  }

  getTreeItem(item: ParallelItem): vscode.TreeItem {
    const shown = safeTreeTexts(item); // function names and paths come from the job: escaped (#37)
    const t = new vscode.TreeItem(shown.label, item.children.length ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
    t.id = item.id;
    // Ranks by verl role (issue #38): "critic 0-1 · actor 0-1", as each role has its own ranks.
    const byRole = ranksByRole(item.node.workers, this.state.workers);
    t.description = byRole ? `${shown.description} · ${byRole}` : shown.description;
    t.tooltip = byRole ? `${shown.tooltip}\nby role: ${byRole}` : shown.tooltip;
    t.contextValue = "parallelFrame";
    t.iconPath = new vscode.ThemeIcon(item.node.branch ? "git-branch" : "debug-stackframe");
    if (item.node.path && item.node.line) {
      t.command = {
        command: "vscode.open",
        title: "Open",
        arguments: [vscode.Uri.file(item.node.path), { selection: new vscode.Range(item.node.line - 1, 0, item.node.line - 1, 0), preview: true }],
      };
    }
    return t;
  }

  getChildren(item?: ParallelItem): ParallelItem[] {
    return item ? item.children : this.roots;
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
