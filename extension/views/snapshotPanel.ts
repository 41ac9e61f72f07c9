// raySleuth.captureHere: a snapshot point at the cursor line on some ranks
// (POST /v1/snapshots), captured without stopping anyone; a webview shows rank ×
// local variable of the innermost frame, filled live from `snapshot` stream
// events (and GET /v1/snapshots/{id}), the cells that differ between ranks marked.
// A point with expressions (Compare Across Ranks) shows their summaries first,
// rank × statistic, flagged by the broker (tensorTable.ts).
import * as path from "path";
import * as vscode from "vscode";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { SnapshotEvent, SnapshotRequest, SnapshotRow } from "../broker/types";
import { ClusterState } from "../cluster/clusterState";
import { pickRanks } from "../cluster/rankPicker";
import { formatRanks } from "../common/ranks";
import { snapshotHtml } from "./html";
import { SnapshotTable, snapshotRowKey, snapshotTable } from "./resultTables";
import { TensorGroup, capturedWorkers, compareGroups } from "./tensorTable";
import { tensorGroupsHtml } from "./tensorHtml";

export const SNAPSHOT_VIEW_TYPE = "raySleuth.snapshot";

/** One snapshot point's rows and its panel. */
export class SnapshotView implements vscode.Disposable {
  private readonly rowsByKey = new Map<string, SnapshotRow>();
  private panel: vscode.WebviewPanel | undefined;
  private readonly changed = new vscode.EventEmitter<void>();
  /** Fired when rows arrive (tests wait on it). */
  readonly onDidChange = this.changed.event;
  private readonly closed = new vscode.EventEmitter<void>();
  readonly onDidClose = this.closed.event;

  constructor(
    readonly id: string,
    readonly title: string,
    /** Captures per worker (the point's count): 1 is one-shot. */
    readonly count = 1,
    /** Expressions the point records (compared across ranks), if any. */
    readonly expressions: readonly string[] = [],
  ) {}

  /** Workers expected to pass the line (a compare's progress), when known. */
  expected: number | undefined;
  /** The broker that holds the point (BrokerConnectionService.instance). */
  instance: string | undefined;
  /** Why the table no longer updates (its broker is gone), once it does not. */
  stale: string | undefined;

  /** Marks the table as a record of a broker that is gone: it stays readable, and says so. */
  markStale(why: string): void {
    if (this.stale === undefined) {
      this.stale = why;
      this.render();
      this.changed.fire();
    }
  }

  /** How the point captures, in the panel's words. */
  get note(): string {
    if (this.stale) {
      return `⚠ ${this.stale}`;
    }
    const workers = new Set(this.table.rows.map((r) => r.worker)).size;
    const each = this.count === 1 ? "One-shot: each worker captures once" : `Each worker captures ${this.count} times`;
    const sofar = this.expected ? `${Math.min(workers, this.expected)} of ${this.expected} ranks so far` : `${workers} worker${workers === 1 ? "" : "s"} so far`;
    return `${each} (${sofar}); close this view to remove the point`;
  }

  get rows(): SnapshotRow[] {
    return [...this.rowsByKey.values()];
  }

  get table(): SnapshotTable {
    return snapshotTable(this.rows, this.count);
  }

  /** The expressions' values, rank × statistic, one group per entry (empty without expressions). */
  get groups(): TensorGroup[] {
    return compareGroups(this.rows, this.count);
  }

  /** Distinct workers whose capture has the expressions' values. */
  get captured(): number {
    return this.expressions.length ? capturedWorkers(this.rows) : new Set(this.rows.map((r) => r.worker)).size;
  }

  /** Every row with values carries the broker's flags (GET's rows do; the stream's do not). */
  get settled(): boolean {
    return this.rows.every((r) => !r.values?.length || r.differs !== undefined);
  }

  /**
   * Rows from the stream or read back; a row already shown is replaced only when `replace`
   * (GET's rows carry the broker's flags across workers, the stream's do not).
   */
  add(rows: readonly SnapshotRow[], replace = false): void {
    let added = false;
    for (const r of rows) {
      const key = snapshotRowKey(r);
      const old = this.rowsByKey.get(key);
      if (!old || (replace && JSON.stringify(old) !== JSON.stringify(r))) {
        this.rowsByKey.set(key, r);
        added = true;
      }
    }
    if (added) {
      this.render();
      this.changed.fire();
    }
  }

  /** The panel's HTML as set (tests read it). */
  get html(): string | undefined {
    return this.panel?.webview.html;
  }

  /** Closes the panel (which ends the snapshot point). */
  close(): void {
    this.panel?.dispose();
  }

  show(): void {
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(SNAPSHOT_VIEW_TYPE, `Snapshot ${this.title}`, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, { enableScripts: false });
      this.panel.onDidDispose(() => {
        this.panel = undefined;
        this.closed.fire();
      });
    }
    this.render();
  }

  private render(): void {
    if (this.panel) {
      const values = this.expressions.length ? tensorGroupsHtml(this.groups, `Waiting for the ranks to pass the line and evaluate ${this.expressions.join(", ")}…`) : "";
      this.panel.webview.html = snapshotHtml(this.expressions.length ? this.title : `Snapshot ${this.title}`, this.table, this.note, values);
    }
  }

  dispose(): void {
    this.panel?.dispose();
    this.changed.dispose();
    this.closed.dispose();
  }
}

/** How often an open snapshot view reads its rows back from the broker. */
const SNAPSHOT_POLL_MS = 2000;

export class SnapshotService implements vscode.Disposable {
  /** Open snapshot views by snapshot id. */
  readonly views = new Map<string, SnapshotView>();
  private poll: ReturnType<typeof setInterval> | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly connection: BrokerConnectionService,
    private readonly state: ClusterState,
  ) {
    this.disposables.push(
      connection.onStreamEvent((e) => {
        if (e.event !== "snapshot" || !e.data || typeof e.data !== "object") {
          return;
        }
        const data = e.data as Partial<SnapshotEvent>;
        const view = this.views.get(String(data.id));
        if (view && data.row && Array.isArray(data.row.frames)) {
          view.add([data.row]);
          if (data.row.values?.length) {
            void this.fetch(view); // the broker flags values across workers on GET
          }
        }
      }),
      // Rows captured while the stream was down come from GET; a view of a broker that is
      // gone (restarted, or another one now) stays as a record and says so (issue 25, item 5).
      connection.onDidConnect(() => {
        for (const view of this.views.values()) {
          if (view.instance !== connection.instance) {
            view.markStale(`the broker that held this point (${view.instance?.split("@")[0] ?? "?"}) has gone: these rows no longer update; capture again to read the cluster now`);
          } else {
            void this.fetch(view);
          }
        }
        if (![...this.views.values()].some((v) => !v.stale)) {
          this.stopPolling();
        }
      }),
    );
  }

  /**
   * Starts a snapshot point and opens its view; undefined when the broker refused (already told).
   * `title`: the view's, instead of "file:line · ranks".
   */
  async capture(request: SnapshotRequest, title?: string): Promise<SnapshotView | undefined> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    let id: string;
    try {
      id = String((await client.createSnapshot(request)).id);
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: capturing at ${path.basename(request.path)}:${request.line} failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
    const ranks = request.ranks?.length ? `rank ${formatRanks(request.ranks)}` : "all ranks";
    const view = new SnapshotView(id, title ?? `${path.basename(request.path)}:${request.line} · ${ranks}`, request.count ?? 1, request.expressions ?? []);
    view.instance = this.connection.instance;
    this.views.set(id, view);
    this.startPolling();
    // Closing the panel ends the snapshot point: the workers stop capturing there.
    view.onDidClose(() => {
      this.views.delete(id);
      if (this.views.size === 0) {
        this.stopPolling();
      }
      if (!view.stale) {
        this.connection.client?.deleteSnapshot(id).then(undefined, (e: unknown) => swallow(`Deleting snapshot ${id}`, e));
      }
    });
    log.info(`Snapshot ${id} at ${request.path}:${request.line} on ${ranks}`);
    view.show();
    await this.fetch(view); // what the stream sent before the id was known
    return view;
  }

  /** The command: the cursor line of the active editor, a pick of ranks (none ticked: all). */
  async command(): Promise<SnapshotView | undefined> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.uri.scheme !== "file") {
      void vsapi.showInformationMessage("Ray Sleuth: open a Python file and put the cursor on the line to capture first.");
      return undefined;
    }
    const uri = editor.document.uri;
    const line = editor.selection.active.line + 1;
    const ranks = await pickRanks(this.state, {
      title: `Ray Sleuth: capture ${path.basename(uri.fsPath)}:${line} on ranks`,
      placeHolder: "Tick the ranks to capture (none ticked: every rank)",
    });
    if (ranks === undefined) {
      return undefined;
    }
    const root = vscode.workspace.getWorkspaceFolder(uri)?.uri.fsPath;
    return this.capture({ path: path.normalize(uri.fsPath), line, ...(ranks.length ? { ranks } : {}), ...(root ? { root } : {}) });
  }

  /**
   * Rows come on the event stream, which drops old events for a slow reader (a busy editor
   * while many workers change): while a view is open its rows are also read back every
   * POLL_MS, and a row already shown is not added twice.
   */
  private startPolling(): void {
    if (this.poll === undefined) {
      this.poll = setInterval(() => {
        for (const view of this.views.values()) {
          void this.fetch(view);
        }
      }, SNAPSHOT_POLL_MS);
    }
  }

  private stopPolling(): void {
    if (this.poll !== undefined) {
      clearInterval(this.poll);
      this.poll = undefined;
    }
  }

  private async fetch(view: SnapshotView): Promise<void> {
    const client = this.connection.client;
    if (!client || view.stale || this.connection.status !== "connected" || view.instance !== this.connection.instance) {
      return; // never asks a broker that is gone, nor another broker for this one's point
    }
    try {
      view.add(await client.getSnapshot(view.id), true);
    } catch (err) {
      swallow(`Fetching snapshot ${view.id}`, err);
    }
  }

  dispose(): void {
    this.stopPolling();
    for (const v of this.views.values()) {
      v.dispose();
    }
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
