// The Crashes view: the broker's crash records, newest first (rank, actor,
// exception, time). A new record on the event stream refreshes the view and
// shows a notification with "Inspect"; a click opens a debug session on the
// record: the live worker while it is held for an attach, else a read-only
// replay of the stored stack and locals (the broker decides: attach {crash}).
// The worker's stderr/stdout open from the notification and the row's menu.
import * as vscode from "vscode";
import { CRASHES_VIEW_ID, Commands, DEBUG_TYPE } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { ClusterState } from "../cluster/clusterState";
import { counted } from "../common/text";
import { markdownText, oneLine } from "../common/textSafe";
import type { CrashRecordSummary } from "../broker/types";

/** At most one notification of a crash not held for an attach per this many ms. */
const NOTIFY_EVERY_MS = 10_000;

/** A row of `GET /v1/crashes`: the one type the GPU chart's markers read too. */
export type CrashSummary = CrashRecordSummary;

/** "rank 2 · Trainer · ZeroDivisionError" for a row; the worker part falls back to its pid. */
export function crashLabel(c: CrashSummary): string {
  const w = c.worker ?? {};
  const who = [typeof w.rank === "number" ? `rank ${w.rank}` : undefined, w.actor_class ?? w.task ?? (w.pid ? `pid ${w.pid}` : undefined)].filter(Boolean);
  const what = c.exc_type ?? c.kind.replace("_", " ");
  return [...who, what].join(" · ");
}

export class CrashesService implements vscode.TreeDataProvider<CrashSummary>, vscode.Disposable {
  crashes: CrashSummary[] = [];
  readonly treeView: vscode.TreeView<CrashSummary>;
  private readonly changed = new vscode.EventEmitter<CrashSummary | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [];
  /** Sessions opened on crash records, by crash id (the tests look at them). */
  readonly opened: string[] = [];
  /** Shows the "new crash" notification (tests replace it to press its button). */
  notifier: (message: string, ...actions: string[]) => Thenable<string | undefined> = (message, ...actions) =>
    vsapi.showWarningMessage(message, ...actions);
  /** Crashes not notified one by one (a burst): counted into the next notification. */
  private unnotified = 0;
  private lastNotified = 0;
  /** Live sessions on held crashes: each ends when its worker is let go (issue 25, item 3). */
  private readonly heldSessions = new Map<string, { session: vscode.DebugSession; worker: string; crash: string; seen: boolean }>();
  /** Crashes whose hold was seen to end: their record opens as a replay from then on. */
  private readonly released = new Set<string>();

  constructor(
    private readonly connection: BrokerConnectionService,
    private readonly state: ClusterState,
  ) {
    this.treeView = vsapi.createTreeView<CrashSummary>(CRASHES_VIEW_ID, { treeDataProvider: this });
    this.disposables.push(
      this.treeView,
      this.changed,
      connection.onDidConnect(() => void this.refresh()),
      connection.onStreamEvent((e) => {
        if (e.event !== "crash" || !e.data || typeof e.data !== "object") {
          return;
        }
        const c = e.data as CrashSummary;
        this.refresh()
          .then(() => this.notify(c))
          .catch((err: unknown) => swallow(`Showing crash ${c.id} failed`, err));
      }),
      state.onDidChange(() => this.endReleasedSessions()),
      vscode.debug.onDidTerminateDebugSession((s) => this.heldSessions.delete(s.id)),
    );
  }

  /**
   * The id of the crash's worker while it is held for this crash: the worker's row says so
   * (crashed, or paused in a session at the raise), or the record's `held_until` does and the
   * hold was not seen to end (the record comes a moment before the row shows the hold).
   */
  private heldWorker(c: CrashSummary | undefined): string | undefined {
    const id = c?.worker?.id;
    if (!c || !id || this.released.has(c.id)) {
      return undefined;
    }
    const w = this.state.workers.find((x) => x.id === id);
    if (w && w.crash === c.id && (w.state === "crashed" || w.state === "paused")) {
      return id;
    }
    if (w?.state === "exited") {
      return undefined;
    }
    return c.held_until && c.held_until * 1000 > Date.now() ? id : undefined;
  }

  /** A held crash's session whose worker was let go (Continue) runs on no crash: end it, so a
   * click on the record opens its replay instead of "already being debugged". */
  private endReleasedSessions(): void {
    for (const [id, h] of this.heldSessions) {
      const w = this.state.workers.find((x) => x.id === h.worker);
      const holding = w !== undefined && w.crash === h.crash && (w.state === "crashed" || w.state === "paused");
      h.seen ||= holding;
      const letGo = w?.state === "exited" || (h.seen && !holding);
      if (this.state.status === "connected" && letGo) {
        this.heldSessions.delete(id);
        this.released.add(h.crash);
        log.info(`Crash ${h.crash} was let go: ending its session; a click on the record replays it`);
        void vscode.debug.stopDebugging(h.session).then(undefined, (err: unknown) => swallow("Ending a released crash's session failed", err));
      }
    }
  }

  async refresh(): Promise<void> {
    const client = this.connection.client;
    if (!client) {
      return;
    }
    try {
      this.crashes = await client.requestJson<CrashSummary[]>("GET", "/v1/crashes");
      this.treeView.badge = this.crashes.length ? { value: this.crashes.length, tooltip: counted(this.crashes.length, "crash record") } : undefined;
      this.changed.fire(undefined);
    } catch (err) {
      swallow("Listing crash records failed", err);
    }
  }

  /** A burst of crashes (a restart loop, a failing step on every rank) is not a burst of
   * notifications: one per NOTIFY_EVERY_MS, the next naming how many came meanwhile. A crash
   * held for an attach is always notified: it waits for the user. */
  private async notify(c: CrashSummary, now = Date.now()): Promise<void> {
    if (!c.held_until && now - this.lastNotified < NOTIFY_EVERY_MS) {
      this.unnotified += 1;
      return;
    }
    this.lastNotified = now;
    const more = this.unnotified ? ` (${this.unnotified} more in the Crashes view)` : "";
    this.unnotified = 0;
    const held = c.held_until ? " It is held for you to attach." : "";
    const pick = await this.notifier(`Ray Sleuth: ${crashLabel(c)} crashed: ${(c.message ?? "").slice(0, 120)}.${held}${more}`, "Inspect", "Show Errors");
    if (pick === "Inspect") {
      await this.inspect(c.id);
    } else if (pick === "Show Errors") {
      await vsapi.executeCommand(Commands.showWorkerErrors, c);
    }
  }

  /** raySleuth.inspectCrash: a session on the record (live while held, else a replay). */
  async inspect(target: unknown): Promise<vscode.DebugSession | undefined> {
    const id = typeof target === "string" ? target : (target as CrashSummary | undefined)?.id;
    if (!id) {
      return undefined;
    }
    const c = this.crashes.find((x) => x.id === id);
    if (!(await this.connection.ensureClient())) {
      return undefined;
    }
    const name = `crash · ${c ? crashLabel(c) : id}`;
    let started: vscode.DebugSession | undefined;
    const sub = vscode.debug.onDidStartDebugSession((s) => {
      if (s.configuration.crash === id) {
        started = s;
      }
    });
    try {
      const folder = vscode.workspace.workspaceFolders?.[0];
      // A crash held for an attach is its live worker: the session is keyed on it, so auto-attach and
      // the Cluster view see that worker as debugged here and open no second session (issue #13, item 2).
      const worker = this.heldWorker(c);
      const held = worker ? { __raySleuthWorker: worker } : {};
      const ok = await vscode.debug.startDebugging(folder, { type: DEBUG_TYPE, request: "attach", name, crash: id, ...held });
      if (!ok) {
        log.warn(`Opening crash ${id} failed`);
        return undefined;
      }
      this.opened.push(id);
      if (started && worker) {
        this.heldSessions.set(started.id, { session: started, worker, crash: id, seen: false });
      }
      return started;
    } finally {
      sub.dispose();
    }
  }

  getTreeItem(c: CrashSummary): vscode.TreeItem {
    // The exception's type and message are the job's own text: shown escaped (#37).
    const item = new vscode.TreeItem(oneLine(crashLabel(c)), vscode.TreeItemCollapsibleState.None);
    const when = new Date(c.time * 1000);
    item.description = oneLine(`${when.toLocaleTimeString()} · ${(c.message ?? "").split("\n")[0].slice(0, 80)}`);
    item.tooltip = new vscode.MarkdownString(
      [
        `**${markdownText(c.exc_type ?? c.kind)}** ${markdownText(c.message ?? "")}`,
        "",
        markdownText(c.hint ?? ""),
        "",
        `crash ${markdownText(c.id)} · ${when.toLocaleString()}`,
      ].join("\n"),
    );
    item.iconPath = new vscode.ThemeIcon(c.kind === "exception" ? "bug" : "flame");
    item.contextValue = c.can_rerun ? "crashRerun" : "crash";
    item.id = c.id;
    item.command = { command: Commands.inspectCrash, title: "Inspect", arguments: [c.id] };
    return item;
  }

  getChildren(element?: CrashSummary): CrashSummary[] {
    return element ? [] : this.crashes;
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
