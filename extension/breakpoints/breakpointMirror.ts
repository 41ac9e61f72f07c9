// Mirrors the editor's Python breakpoints into the broker's cluster set
// (PUT /v1/breakpoints, this window's whole set in one file per request, under
// its owner name) so that every worker the scopes select is armed, with or
// without a debug session (issue #4). Points other owners set (the terminal, an
// HTTP client, another window) are never sent, so never removed, from here.
// Debounced; one request at a time per file, the last one sent is the editor's
// latest state; failures are told once, never as a flood.
import { randomUUID } from "crypto";
import * as path from "path";
import * as vscode from "vscode";
import { Settings } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { BrokerError } from "../broker/brokerClient";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { BreakpointSpec, FileBreakpoints } from "../broker/types";
import { isOwnedBy } from "./annotations";
import { rankScopeOf } from "./rankScope";
import { ClusterBreakpointStore } from "./clusterBreakpointStore";

const DEBOUNCE_MS = 100;
const MIRRORED_KEY = "raySleuth.mirroredFiles";
const OWNER_KEY = "raySleuth.breakpointOwner";
const SHOW_LOG = "Show Log";

/** How a failure reaches the user; replaceable so tests can see what would be shown. */
export interface MirrorNotifier {
  warn(message: string, ...actions: string[]): Thenable<string | undefined>;
}

/**
 * This window's owner name in the cluster set, "vscode:<id>". The id is kept in
 * the workspace's state, so a reloaded window takes its earlier points back
 * instead of leaving them behind under a name no one uses (the broker keeps the
 * set across its restarts); without a memento, the editor session's id.
 */
export function editorOwner(memento: vscode.Memento | undefined): string {
  let id = memento?.get<string>(OWNER_KEY);
  if (!id) {
    id = memento ? randomUUID().slice(0, 13) : vscode.env.sessionId.slice(0, 40);
    memento?.update(OWNER_KEY, id).then(undefined, (e: unknown) => swallow("Saving the breakpoint owner id failed", e));
  }
  return `vscode:${id}`;
}

/** The local file of a Python source breakpoint; undefined for anything else. */
export function pythonFileOf(bp: vscode.Breakpoint): string | undefined {
  if (!(bp instanceof vscode.SourceBreakpoint)) {
    return undefined;
  }
  const uri = bp.location.uri;
  return uri.scheme === "file" && /\.pyw?$/i.test(uri.path) ? path.normalize(uri.fsPath) : undefined;
}

/** The file's enabled breakpoints as the PUT body wants them: by line, one per line. */
export function fileSpecs(fsPath: string, breakpoints: readonly vscode.Breakpoint[], firstRank = false): BreakpointSpec[] {
  const byLine = new Map<number, BreakpointSpec>();
  for (const bp of breakpoints) {
    if (!bp.enabled || pythonFileOf(bp) !== fsPath) {
      continue;
    }
    const sbp = bp as vscode.SourceBreakpoint;
    const line = sbp.location.range.start.line + 1;
    if (byLine.has(line)) {
      continue; // column breakpoints on one line: the cluster set has lines only
    }
    byLine.set(line, {
      line,
      ...(sbp.condition ? { condition: sbp.condition } : {}),
      ...(sbp.hitCondition ? { hitCondition: sbp.hitCondition } : {}),
      ...(sbp.logMessage ? { logMessage: sbp.logMessage } : {}),
      ...(firstRank && !sbp.logMessage && rankScopeOf(sbp.condition) === undefined ? { firstRank: true } : {}),
    });
  }
  return [...byLine.values()].sort((a, b) => a.line - b.line);
}

interface FileQueue {
  running: Promise<void> | undefined;
  /** Another change came while a PUT was in flight: send the latest state once more. */
  again: boolean;
}

export class BreakpointMirrorService implements vscode.Disposable {
  notifier: MirrorNotifier = { warn: (m, ...a) => vsapi.showWarningMessage(m, ...a) };

  /** Files whose non-empty set the broker got from this window (so their last removal is sent too). */
  private readonly mirrored: Set<string>;
  private readonly dirty = new Set<string>();
  private readonly queues = new Map<string, FileQueue>();
  /** The failure of each file's last PUT; cleared by its next success. */
  private readonly failures = new Map<string, string>();
  private lastWarning: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private enabled: boolean;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly connection: BrokerConnectionService,
    private readonly store: ClusterBreakpointStore,
    /** This window's owner name ("vscode:<id>", see editorOwner): the PUTs replace only its points. */
    readonly owner: string,
    private readonly memento?: vscode.Memento,
  ) {
    this.mirrored = new Set(memento?.get<string[]>(MIRRORED_KEY, []) ?? []);
    this.enabled = this.settingOn();
    this.disposables.push(
      vscode.debug.onDidChangeBreakpoints((e) => {
        for (const bp of [...e.added, ...e.removed, ...e.changed]) {
          const file = pythonFileOf(bp);
          if (file) {
            this.dirty.add(file);
          }
        }
        this.schedule();
      }),
      connection.onDidConnect(() => this.syncAll()),
      vsapi.onDidChangeSettings([Settings.clusterBreakpoints], () => this.settingChanged()),
      vsapi.onDidChangeSettings([Settings.plainBreakpoints], () => this.syncAll()),
    );
  }

  toString(): string {
    return `BreakpointMirror[${this.owner}, ${this.mirrored.size} files]`;
  }

  /** Resolves once nothing is waiting to be sent and no PUT is in flight (for tests and the log). */
  async idle(): Promise<void> {
    for (;;) {
      const running = [...this.queues.values()].map((q) => q.running).filter((p): p is Promise<void> => p !== undefined);
      if (!this.timer && running.length === 0) {
        return;
      }
      await Promise.all(running);
      if (this.timer) {
        await new Promise((r) => setTimeout(r, DEBOUNCE_MS));
      }
    }
  }

  /**
   * Takes over the cluster breakpoint another owner set at `line` of `file` (the language server's
   * `breakpoint()` quick fix, owner "lsp") once the editor has one there: when this window's own
   * point at that line is in the cluster set, the other owner's goes, so the set holds it once and
   * removing the editor's breakpoint removes it. Off (cluster breakpoints not mirrored) or failed:
   * the other owner's point stays. Resolves to whether it was taken over.
   */
  async adopt(file: string, line: number, from: string): Promise<boolean> {
    const want = path.normalize(file);
    if (!this.enabled || from === this.owner) {
      return false;
    }
    await this.idle(); // the editor's new point has gone out
    const client = this.connection.client;
    if (!client || !this.store.forFile(want).some((b) => b.line === line && isOwnedBy(b, this.owner))) {
      log.info(`Kept ${from}'s cluster breakpoint at ${want}:${line}: this window's point is not in the cluster set`);
      return false;
    }
    try {
      const theirs = (await client.getBreakpoints()).filter((b) => b.owner === from && path.normalize(b.path) === want);
      if (!theirs.some((b) => b.line === line)) {
        return false;
      }
      const rest: BreakpointSpec[] = theirs
        .filter((b) => b.line !== line)
        .map((b) => ({
          line: b.line,
          ...(b.condition ? { condition: b.condition } : {}),
          ...(b.hitCondition ? { hitCondition: b.hitCondition } : {}),
          ...(b.logMessage ? { logMessage: b.logMessage } : {}),
          ...(b.ranks ? { ranks: b.ranks } : {}),
        }));
      await client.putBreakpoints({ path: theirs[0].path, owner: from, breakpoints: rest });
      log.info(`This window's breakpoint at ${want}:${line} took over the one ${from} set there`);
      return true;
    } catch (err) {
      swallow(`Taking over ${from}'s cluster breakpoint at ${want}:${line} failed`, err);
      return false;
    }
  }

  /** Sends every file: those with breakpoints now, and those mirrored before (maybe emptied meanwhile). */
  syncAll(): void {
    for (const bp of vscode.debug.breakpoints) {
      const file = pythonFileOf(bp);
      if (file) {
        this.dirty.add(file);
      }
    }
    for (const file of this.mirrored) {
      this.dirty.add(file);
    }
    this.schedule();
  }

  private settingOn(): boolean {
    return vsapi.getSetting<boolean>(Settings.clusterBreakpoints, true);
  }

  private settingChanged(): void {
    const on = this.settingOn();
    if (on === this.enabled) {
      return;
    }
    this.enabled = on;
    log.info(`Cluster breakpoints ${on ? "on: mirroring the editor's breakpoints" : "off: clearing what this window mirrored"}`);
    if (on) {
      this.syncAll();
    } else {
      // Off means the editor's breakpoints are not in the cluster set: take back what was sent.
      for (const file of this.mirrored) {
        this.dirty.add(file);
      }
      this.schedule();
    }
  }

  private schedule(): void {
    if (this.timer || this.dirty.size === 0) {
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush().catch((e: unknown) => swallow("Sending the editor's breakpoints failed", e));
    }, DEBOUNCE_MS);
  }

  private async flush(): Promise<void> {
    const files = [...this.dirty];
    this.dirty.clear();
    if (!this.connection.client) {
      return; // syncAll() on the next connect sends everything
    }
    await Promise.all(files.map((f) => this.send(f)));
    this.reportFailures();
  }

  /** Queues one PUT of the file; sends its state at the time the PUT goes out. */
  private send(file: string): Promise<void> {
    let q = this.queues.get(file);
    if (!q) {
      q = { running: undefined, again: false };
      this.queues.set(file, q);
    }
    if (q.running) {
      q.again = true;
      return q.running;
    }
    const queue = q;
    queue.running = (async () => {
      do {
        queue.again = false;
        await this.put(file);
      } while (queue.again);
    })().finally(() => {
      queue.running = undefined;
    });
    return queue.running;
  }

  private async put(file: string): Promise<void> {
    const client = this.connection.client;
    if (!client) {
      return;
    }
    const firstRank = vsapi.getSetting<string>(Settings.plainBreakpoints, "firstRank") === "firstRank";
    const specs = this.settingOn() ? fileSpecs(file, vscode.debug.breakpoints, firstRank) : [];
    if (specs.length === 0 && !this.mirrored.has(file)) {
      this.failures.delete(file); // the broker has nothing of this file from this window: nothing is wrong now
      return;
    }
    const root = vscode.workspace.getWorkspaceFolder(vscode.Uri.file(file))?.uri.fsPath;
    const body: FileBreakpoints = { path: file, owner: this.owner, ...(root ? { root } : {}), breakpoints: specs };
    try {
      const reply = await client.putBreakpoints(body);
      this.failures.delete(file);
      this.setMirrored(file, specs.length > 0);
      if (client === this.connection.client) {
        this.store.replaceOwned(file, this.owner, Array.isArray(reply?.breakpoints) ? reply.breakpoints : []);
      }
      log.debug(`Cluster breakpoints of ${file}: ${specs.map((s) => s.line).join(", ") || "none"}`);
    } catch (err) {
      const text = failureText(err, client.url);
      this.failures.set(file, text);
      log.warn(`PUT /v1/breakpoints for ${file} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private setMirrored(file: string, has: boolean): void {
    const before = this.mirrored.size;
    if (has) {
      this.mirrored.add(file);
    } else {
      this.mirrored.delete(file);
    }
    if (this.mirrored.size !== before && this.memento) {
      this.memento.update(MIRRORED_KEY, [...this.mirrored]).then(undefined, (e: unknown) => swallow("Saving the mirrored files failed", e));
    }
  }

  /** One warning for what failed now; the same text again is not shown twice in a row. */
  private reportFailures(): void {
    if (this.failures.size === 0) {
      this.lastWarning = undefined;
      return;
    }
    const entries = [...this.failures];
    const message =
      entries.length === 1
        ? `Ray Sleuth: the cluster did not take the breakpoints of ${path.basename(entries[0][0])}: ${entries[0][1]}`
        : `Ray Sleuth: the cluster did not take the breakpoints of ${entries.length} files: ` +
          entries.map(([f, t]) => `${path.basename(f)}: ${t}`).join("; ");
    if (message === this.lastWarning) {
      return;
    }
    this.lastWarning = message;
    this.notifier.warn(message, SHOW_LOG).then(
      (picked) => picked === SHOW_LOG && log.show(),
      (e: unknown) => swallow("Showing a warning failed", e),
    );
  }

  dispose(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}

/** The broker's error and hint (a 400 names the bad condition), or what went wrong on the way. */
function failureText(err: unknown, url: string): string {
  if (err instanceof BrokerError && err.kind === "http") {
    if (err.status === 404 && !err.hint) {
      return `the broker at ${url} does not keep cluster breakpoints (404). Update raysleuth where the broker runs.`;
    }
    return [err.brokerError ?? err.message, err.hint].filter(Boolean).join(" ");
  }
  return err instanceof Error ? err.message : String(err);
}
