// The Stacks view (raySleuth.stacks): every worker's stack from GET /v1/stacks,
// grouped by rank ranges, the group that holds the others back marked; a frame
// opens the file at its line (mapped as attach maps it). Actions on a group:
// attach, capture here on its ranks, copy as text. The broker's hang watch is
// toggled here; a `stacks` event refreshes the view, a `hang` event notifies.
// The content and its text come from stackTree.ts; this file only shows them.
import * as fs from "fs";
import * as vscode from "vscode";
import { Commands, ContextKeys, STACKS_VIEW_ID, Settings } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { formatRanks } from "../common/ranks";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { HangEvent, SnapshotRequest, StacksQuery, StacksResult, StacksWatchRequest, StacksWatchStatus } from "../broker/types";
import { ClusterState } from "../cluster/clusterState";
import { mergePathMappings } from "../debug/attachConfig";
import { behindText, buildStackTree, groupText, localPath, resultSummary, resultText, StackFrameNode, StackGroupNode, StackNode, stackChildren, topUserFrame } from "./stackTree";
import { multiLine, safeTreeTexts } from "../common/textSafe";

/** The watch the toggle starts: a sample every 10 s, a hang after 3 equal ones (issue #12). */
const WATCH_INTERVAL_S = 10;
const WATCH_SAMPLES = 3;

const SHOW_STACKS = "Show Stacks";

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class StacksService implements vscode.TreeDataProvider<StackNode>, vscode.Disposable {
  readonly treeView: vscode.TreeView<StackNode>;
  /** The last answer shown (a fetch or a `stacks` event). */
  result: StacksResult | undefined;
  roots: StackNode[] = [];
  /** Whether the broker's hang watch is on, as last heard. */
  watching = false;
  /** Seconds between the watch's samples, while it is on. */
  private watchInterval: number | undefined;
  private readonly byId = new Map<string, StackNode>();
  private readonly changed = new vscode.EventEmitter<StackNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [];
  /** Shows the "suspected hang" notification (tests replace it to press its button). */
  notifier: (message: string, ...actions: string[]) => Thenable<string | undefined> = (message, ...actions) =>
    vsapi.showWarningMessage(message, ...actions);

  constructor(
    private readonly connection: BrokerConnectionService,
    private readonly state: ClusterState,
    /** Starts a snapshot point and opens its table (the Capture Here service). */
    private readonly capture: (request: SnapshotRequest) => Thenable<unknown>,
  ) {
    this.treeView = vsapi.createTreeView<StackNode>(STACKS_VIEW_ID, { treeDataProvider: this, showCollapseAll: true });
    this.disposables.push(
      this.treeView,
      this.changed,
      connection.onDidConnect(() => {
        void this.readWatch();
        this.markStaleIfMoved();
      }),
      connection.onDidChangeStatus(() => this.markStaleIfMoved()),
      connection.onStreamEvent((e) => {
        if (e.event === "stacks" && e.data && typeof e.data === "object" && Array.isArray((e.data as StacksResult).groups)) {
          this.setResult(e.data as StacksResult);
        } else if (e.event === "hang" && e.data && typeof e.data === "object") {
          this.notifyHang(e.data as HangEvent).catch((err: unknown) => swallow("Showing a suspected hang failed", err));
        }
      }),
    );
  }

  /** raySleuth.showStacks: the view, filled with every worker's stack now. */
  async show(query: StacksQuery = {}): Promise<StacksResult | undefined> {
    await vsapi.executeCommand(Commands.focusStacks).then(undefined, (e: unknown) => swallow("Focusing the Stacks view failed", e));
    return this.refresh(query);
  }

  /** Takes the stacks again (undefined when the broker could not: the user is told why). */
  async refresh(query: StacksQuery = {}): Promise<StacksResult | undefined> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    try {
      const result = await vscode.window.withProgress({ location: { viewId: STACKS_VIEW_ID } }, () => client.getStacks(query));
      this.setResult(result);
      log.info(`Stacks: ${resultSummary(result)}, ${result.groups.length} group(s)`);
      return result;
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: taking the workers' stacks failed: ${describe(err)}`);
      return undefined;
    }
  }

  /** The broker the shown stacks came from (BrokerConnectionService.instance). */
  private resultInstance: string | undefined;
  /** Set while the stacks shown are from a broker that is gone or unreachable. */
  stale: string | undefined;

  /** Stacks of a broker that is gone stay readable, marked as such (issue 25, item 5). */
  private markStaleIfMoved(): void {
    if (!this.result) {
      return;
    }
    const gone = this.connection.status !== "connected" ? "the broker does not answer" : this.resultInstance !== this.connection.instance ? "the broker changed since" : undefined;
    if (gone !== this.stale) {
      this.stale = gone;
      this.showMessage();
    }
  }

  private setResult(result: StacksResult): void {
    this.result = result;
    this.resultInstance = this.connection.instance;
    this.stale = undefined;
    this.roots = buildStackTree(result);
    this.byId.clear();
    const index = (nodes: StackNode[]) => {
      for (const n of nodes) {
        this.byId.set(n.id, n);
        index(stackChildren(n));
      }
    };
    index(this.roots);
    this.showMessage();
    this.changed.fire(undefined);
  }

  /** "16:05:03 · 12 workers in 340 ms · watching every 10 s": when, what a sample cost, whether the watch runs. */
  private showMessage(): void {
    const watch = this.watching ? `watching every ${this.watchInterval ?? WATCH_INTERVAL_S} s` : undefined;
    const taken = this.result ? `${new Date((this.result.time ?? Date.now() / 1000) * 1000).toLocaleTimeString()} · ${resultSummary(this.result)}` : undefined;
    const stale = this.stale ? `⚠ stale: ${this.stale}; Refresh reads the cluster now` : undefined;
    this.treeView.message = [stale, taken, watch].filter(Boolean).join(" · ") || undefined;
  }

  getTreeItem(node: StackNode): vscode.TreeItem {
    const shown = safeTreeTexts(node); // frames, errors and hints come from the workers: escaped (#37)
    const item = new vscode.TreeItem(shown.label, vscode.TreeItemCollapsibleState.None);
    item.id = node.id;
    item.description = shown.description;
    switch (node.kind) {
      case "job":
        item.collapsibleState = vscode.TreeItemCollapsibleState.Expanded;
        item.iconPath = new vscode.ThemeIcon("symbol-namespace");
        item.contextValue = "stackJob";
        break;
      case "group":
        // A lagging group opens by itself: its frames are what the user came for.
        item.collapsibleState = node.lagging ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed;
        item.iconPath = node.lagging ? new vscode.ThemeIcon("warning", new vscode.ThemeColor("list.warningForeground")) : new vscode.ThemeIcon("layers");
        item.tooltip = multiLine(node.tooltip);
        item.contextValue = node.lagging ? "stackGroup.lagging" : "stackGroup";
        break;
      case "frame":
        item.iconPath = new vscode.ThemeIcon(node.library ? "library" : "debug-stackframe");
        item.tooltip = multiLine(node.tooltip);
        item.contextValue = "stackFrame";
        item.command = { command: Commands.openStackFrame, title: "Open Frame", arguments: [node] };
        break;
      case "library":
        // verl's dispatch wrappers, Ray's executor: folded, one click away (issue #38).
        item.collapsibleState = vscode.TreeItemCollapsibleState.Collapsed;
        item.iconPath = new vscode.ThemeIcon("library");
        item.tooltip = multiLine(node.tooltip);
        item.contextValue = "stackLibraryFrames";
        break;
      case "unanswered":
        item.iconPath = new vscode.ThemeIcon("question", new vscode.ThemeColor("list.warningForeground"));
        item.tooltip = multiLine(node.tooltip);
        item.contextValue = "stackUnanswered";
        break;
    }
    return item;
  }

  getChildren(node?: StackNode): StackNode[] {
    return node ? stackChildren(node) : this.roots;
  }

  getParent(node: StackNode): StackNode | undefined {
    if (node.kind === "frame" || node.kind === "library") {
      return this.byId.get((node.kind === "frame" && node.runId) || node.groupId);
    }
    for (const root of this.roots) {
      if (root.kind === "job" && root.children.some((c) => c.id === node.id)) {
        return root;
      }
    }
    return undefined;
  }

  /** The group a command was given (the group itself or one of its frames), by id so a refresh does not strand it. */
  private groupOf(target: unknown): StackGroupNode | undefined {
    const node = target as StackNode | undefined;
    const id = node?.kind === "frame" || node?.kind === "library" ? node.groupId : node?.id;
    const found = id ? this.byId.get(id) : undefined;
    return found?.kind === "group" ? found : node?.kind === "group" ? node : undefined;
  }

  /** Where a frame's file is on this machine, mapped as attach maps it; undefined when it is not here. */
  localFile(frame: StackFrameNode["frame"], group: StackGroupNode | undefined): string | undefined {
    const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file").map((f) => f.uri.fsPath);
    const mappings = mergePathMappings([], vsapi.getSetting<unknown>(Settings.pathMappings, []), folders[0]);
    const ids = new Set(group?.group.workers ?? []);
    const cwd = this.state.workers.find((w) => ids.has(w.id) && w.cwd)?.cwd;
    return localPath(frame.path, { mappings, cwd, folders, exists: (p) => fs.existsSync(p) });
  }

  /** raySleuth.openStackFrame: the frame's file at its line. */
  async openFrame(target: unknown): Promise<vscode.TextEditor | undefined> {
    const node = target as StackNode | undefined;
    if (node?.kind !== "frame") {
      return undefined;
    }
    const file = this.localFile(node.frame, this.groupOf(node));
    if (!file) {
      void vsapi.showErrorMessage(
        `Ray Sleuth: ${node.frame.path} is not on this machine. Map the worker's folder to yours with the setting raySleuth.pathMappings, or open the folder the job runs from.`,
      );
      return undefined;
    }
    const at = new vscode.Position(Math.max(0, node.frame.line - 1), 0);
    try {
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(file));
      return await vscode.window.showTextDocument(doc, { selection: new vscode.Range(at, at), preview: true });
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: opening ${file}:${node.frame.line} failed: ${describe(err)}`);
      return undefined;
    }
  }

  /** raySleuth.attachStackRank: a debug session on the group's worker (asks which when the group has several). */
  async attachRank(target: unknown): Promise<unknown> {
    const group = this.groupOf(target);
    if (!group) {
      return undefined;
    }
    const workers = (this.result?.workers ?? []).filter((w) => group.group.workers.includes(w.worker));
    let worker = workers[0]?.worker ?? group.group.workers[0];
    if (workers.length > 1) {
      const picked = await vscode.window.showQuickPick(
        workers.map((w) => ({ label: w.rank === null ? `pid ${w.pid}` : `rank ${w.rank}`, description: `${w.actor_class ?? w.task ?? ""} · pid ${w.pid}`, worker: w.worker })),
        { title: `Ray Sleuth: attach to a rank of ${group.label}`, placeHolder: "The worker to debug" },
      );
      if (!picked) {
        return undefined;
      }
      worker = picked.worker;
    }
    return worker ? vsapi.executeCommand(Commands.attachWorker, worker) : undefined;
  }

  /** raySleuth.captureStackHere: a snapshot point at the frame (a group: its innermost user frame) on the group's ranks. */
  async captureHere(target: unknown): Promise<unknown> {
    const group = this.groupOf(target);
    const node = target as StackNode | undefined;
    const frame = node?.kind === "frame" ? node.frame : group ? topUserFrame(group.group.frames) : undefined;
    if (!group || !frame) {
      return undefined;
    }
    const file = this.localFile(frame, group) ?? frame.path;
    const root = vscode.workspace.getWorkspaceFolder(vscode.Uri.file(file))?.uri.fsPath;
    log.info(`Capture at ${file}:${frame.line} on rank ${formatRanks(group.ranks)} (from the Stacks view)`);
    return this.capture({ path: file, line: frame.line, ...(group.ranks.length ? { ranks: group.ranks } : {}), ...(root ? { root } : {}) });
  }

  /** raySleuth.copyStacks: the group's lines (given one), else the whole answer, on the clipboard. */
  async copyText(target?: unknown): Promise<string | undefined> {
    const group = target ? this.groupOf(target) : undefined;
    const text = group ? groupText(group) : this.result ? resultText(this.result) : undefined;
    if (!text) {
      void vsapi.showInformationMessage("Ray Sleuth: no stacks to copy yet. Run Ray Sleuth: Show All Stacks first.");
      return undefined;
    }
    await vscode.env.clipboard.writeText(text);
    vsapi.setStatusBarMessage(`Ray Sleuth: ${group ? group.label : "all stacks"} copied`, 4000);
    return text;
  }

  /** raySleuth.watchHangs / stopWatchingHangs: turns the broker's hang watch on (every 10 s, 3 samples) when off, off when on. */
  async toggleWatch(settings: StacksWatchRequest = { interval: WATCH_INTERVAL_S, samples: WATCH_SAMPLES }): Promise<StacksWatchStatus | undefined> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    try {
      const now = await client.getStacksWatch();
      let next: StacksWatchStatus;
      if (now.on) {
        await client.deleteStacksWatch();
        next = { ...now, on: false };
        vsapi.setStatusBarMessage("Ray Sleuth: stopped watching for hangs", 5000);
      } else {
        next = await client.setStacksWatch(settings);
        const cost = typeof now.cost_ms === "number" ? ` (the last sample took ${Math.round(now.cost_ms)} ms)` : "";
        void vsapi.showInformationMessage(
          `Ray Sleuth: watching for hangs: the stacks of every worker every ${next.interval ?? WATCH_INTERVAL_S} s; a job whose stacks stay the same for ${next.samples ?? WATCH_SAMPLES} samples is reported${cost}.`,
        );
      }
      this.setWatching(!now.on, next.interval);
      return next;
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: switching the hang watch failed: ${describe(err)}`);
      return undefined;
    }
  }

  private setWatching(on: boolean, interval?: number): void {
    this.watching = on;
    this.watchInterval = interval;
    this.showMessage();
    void vsapi.setContext(ContextKeys.watchingHangs, on); // logs its own failure
  }

  /** What the broker's watch is doing now (after a connect: a broker restart forgets it). */
  private async readWatch(): Promise<void> {
    try {
      const status = await this.connection.client?.getStacksWatch();
      if (status) {
        this.setWatching(!!status.on, status.interval);
      }
    } catch (err) {
      swallow("Reading the hang watch's state failed", err);
    }
  }

  private async notifyHang(h: HangEvent): Promise<void> {
    const job = h.job_id ? `job ${h.job_id}` : "a job";
    const since = typeof h.since === "number" ? ` since ${new Date(h.since * 1000).toLocaleTimeString()}` : "";
    log.warn(`Suspected hang in ${job}: ranks ${h.ranks_text}${since}\n${h.text ?? ""}`);
    const behind = h.behind?.length ? ` Behind: ${behindText(h.behind[0])}${h.behind.length > 1 ? ` (and ${h.behind.length - 1} more)` : ""}.` : "";
    const pick = await this.notifier(
      `Ray Sleuth: suspected hang in ${job}: ranks ${h.ranks_text} showed the same stacks for ${h.samples} samples${since}, with no new step.${behind}`,
      SHOW_STACKS,
    );
    if (pick === SHOW_STACKS) {
      await this.show();
    }
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
