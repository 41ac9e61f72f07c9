// The Cluster view (raySleuth.workers): nodes → verl role or actor-class groups → workers,
// rebuilt from ClusterState on every change. Shapes items only; the grouping
// and the texts come from workerGrouping.ts.
import * as vscode from "vscode";
import { Commands } from "../constants";
import { WorkerInfo, WorkerState } from "../broker/types";
import { ClusterState } from "./clusterState";
import { oneLine } from "../common/textSafe";
import {
  groupWorkers,
  NodeGroup,
  nodeDescription,
  nodeLabel,
  WorkerGroup,
  workerDescription,
  workerLabel,
  workerTooltip,
  shownState,
  ShowOptions,
  EXITED_GROUP,
  IDLE_GROUP,
  TASKS_GROUP,
} from "./workerGrouping";

export type ClusterTreeNode =
  | { kind: "node"; node: NodeGroup }
  | { kind: "group"; group: WorkerGroup }
  | { kind: "worker"; worker: WorkerInfo };

const STATE_ICONS: Record<WorkerState, vscode.ThemeIcon> = {
  running: new vscode.ThemeIcon("play-circle", new vscode.ThemeColor("testing.iconPassed")),
  idle: new vscode.ThemeIcon("circle-large-outline"),
  paused: new vscode.ThemeIcon("debug-pause", new vscode.ThemeColor("debugIcon.pauseForeground")),
  crashed: new vscode.ThemeIcon("error", new vscode.ThemeColor("errorForeground")),
  exited: new vscode.ThemeIcon("circle-slash", new vscode.ThemeColor("disabledForeground")),
};
/** A worker whose state the broker cannot tell now (it is unreachable). */
const UNKNOWN_ICON = new vscode.ThemeIcon("question", new vscode.ThemeColor("disabledForeground"));

export class WorkerTreeProvider implements vscode.TreeDataProvider<ClusterTreeNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<ClusterTreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: vscode.Disposable;
  private roots: NodeGroup[] | undefined;
  /** Redraws the countdowns of paused workers every second while any has a deadline. */
  private ticker: NodeJS.Timeout | undefined;

  constructor(private readonly state: ClusterState) {
    this.subscription = state.onDidChange(() => {
      this.roots = undefined;
      this.changed.fire(undefined);
      this.tick();
    });
  }

  private tick(): void {
    const counting = this.state.status === "connected" && this.state.workers.some((w) => w.state === "paused" && w.deadline);
    if (counting && !this.ticker) {
      this.ticker = setInterval(() => this.changed.fire(undefined), 1000);
    } else if (!counting && this.ticker) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }

  /** While the broker cannot be reached (reconnecting) the last known states may be wrong. */
  private get options(): ShowOptions {
    return { stale: this.state.status !== "connected", now: Date.now() };
  }

  /** The current tree, nodes first (also what tests read). */
  get nodes(): NodeGroup[] {
    this.roots ??= groupWorkers(this.state.workers, this.state.nodes);
    return this.roots;
  }

  getChildren(element?: ClusterTreeNode): ClusterTreeNode[] {
    if (!element) {
      return this.nodes.map((node) => ({ kind: "node", node }));
    }
    switch (element.kind) {
      case "node":
        return element.node.groups.map((group) => ({ kind: "group", group }));
      case "group":
        return element.group.workers.map((worker) => ({ kind: "worker", worker }));
      case "worker":
        return [];
    }
  }

  /** Where an element sits (TreeView.reveal needs it); elements are matched by their ids, as the view does. */
  getParent(element: ClusterTreeNode): ClusterTreeNode | undefined {
    for (const node of this.nodes) {
      for (const group of node.groups) {
        if (element.kind === "group" && group.nodeId === element.group.nodeId && group.name === element.group.name) {
          return { kind: "node", node };
        }
        if (element.kind === "worker" && group.workers.some((w) => w.id === element.worker.id)) {
          return { kind: "group", group };
        }
      }
    }
    return undefined;
  }

  /**
   * Shows these workers in the view (a code lens's "N workers"): each one's node and group
   * opened, the first selected and focused; with none found, the view itself. Returns how many were found.
   */
  async reveal(view: vscode.TreeView<ClusterTreeNode>, ids: readonly string[]): Promise<number> {
    const want = new Set(ids);
    const found = this.nodes
      .flatMap((n) => n.groups.flatMap((g) => g.workers))
      .filter((w) => want.delete(w.id))
      .map((worker): ClusterTreeNode => ({ kind: "worker", worker }));
    if (found.length === 0) {
      await vscode.commands.executeCommand(Commands.focusWorkers);
      return 0;
    }
    for (const element of found.slice(1)) {
      await view.reveal(element, { select: false, focus: false });
    }
    await view.reveal(found[0], { select: true, focus: true });
    return found.length;
  }

  getTreeItem(element: ClusterTreeNode): vscode.TreeItem {
    switch (element.kind) {
      case "node": {
        const n = element.node;
        const item = new vscode.TreeItem(nodeLabel(n), vscode.TreeItemCollapsibleState.Expanded);
        item.id = `node:${n.nodeId}`;
        item.description = nodeDescription(n);
        item.iconPath = new vscode.ThemeIcon(n.alive ? "server" : "debug-disconnect");
        item.tooltip = `node ${oneLine(n.nodeId)}\nip: ${oneLine(n.nodeIp)}\nalive: ${n.alive ? "yes" : "no"}\nworkers: ${n.workerCount}${n.exitedCount ? ` (and ${n.exitedCount} exited)` : ""}`;
        item.contextValue = n.alive ? "node.alive" : "node.dead";
        return item;
      }
      case "group": {
        const g = element.group;
        const exited = g.name === EXITED_GROUP;
        // The group is the actor class a job named: its text shown escaped, as every label here (#37).
        const name = oneLine(g.name);
        const item = new vscode.TreeItem(exited ? `Exited (${g.workers.length})` : name, exited ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.Expanded);
        item.id = `group:${g.nodeId}:${g.name}`;
        item.description = exited ? "" : `${g.workers.length}`;
        const plain = g.name === TASKS_GROUP || g.name === IDLE_GROUP;
        item.iconPath = new vscode.ThemeIcon(exited ? "history" : plain ? "list-unordered" : g.role ? "organization" : "symbol-class");
        item.tooltip = exited
          ? `${g.workers.length} worker(s) that are gone: finished jobs, killed actors (their crash records stay in the Crashes view). ` +
            `"(no agent)": Ray listed the process, but no Ray Sleuth agent ran in it (e.g. one of Ray's prestarted idle workers). The rows go once Ray forgets them.`
          : plain
            ? `${name}: workers that host no actor`
            : g.role
              ? `verl ${g.name.includes(" + ") ? "roles" : "role or worker group"} ${name}: ${g.workers.length} worker(s), ranks ${oneLine(g.workers.map((w) => w.rank ?? "?").join(", "))}; [role …] or [group …] in a breakpoint condition stops only these`
              : `actor class ${name}: ${g.workers.length} worker(s)`;
        item.contextValue = exited ? "group.exited" : plain ? "group.plain" : "group.actor";
        return item;
      }
      case "worker": {
        const w = element.worker;
        const options = this.options;
        const shown = shownState(w, options);
        const item = new vscode.TreeItem(workerLabel(w), vscode.TreeItemCollapsibleState.None);
        item.id = `worker:${w.id}`;
        item.description = workerDescription(w, options);
        item.iconPath = shown === "unknown" ? UNKNOWN_ICON : (STATE_ICONS[shown] ?? UNKNOWN_ICON);
        item.tooltip = workerTooltip(w, options);
        item.contextValue = `worker.${shown}`;
        if (w.agent && shown !== "exited" && shown !== "unknown") {
          // A click attaches (or focuses the worker's session if it has one).
          item.command = { command: Commands.attachWorker, title: "Attach Debugger", arguments: [element] };
        }
        return item;
      }
    }
  }

  dispose(): void {
    if (this.ticker) {
      clearInterval(this.ticker);
    }
    this.subscription.dispose();
    this.changed.dispose();
  }
}
