// raySleuth.showWorkerOutput / showWorkerErrors: a worker's stdout or stderr
// (Ray's worker-*.out / .err on its node, read by the broker through the node's
// relay) as a read-only document that follows live: every second, while it is
// visible, the range after next_offset is read and appended. Nothing is polled
// for a document nobody sees, nothing after it is closed.
import * as vscode from "vscode";
import { Commands } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import type { BrokerAccess } from "../broker/brokerConnection";
import { WorkerInfo } from "../broker/types";
import { ClusterState } from "../cluster/clusterState";
import { workerLabel } from "../cluster/workerGrouping";
import { LogFollower } from "./logFollower";

export const WORKER_LOG_SCHEME = "raysleuth-log";
const POLL_MS = 1000;

export type LogStream = "out" | "err";

export class WorkerLogsService implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly followers = new Map<string, LogFollower>();
  private readonly polling = new Set<string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly timer: NodeJS.Timeout;
  private readonly disposables: vscode.Disposable[] = [this.changed];

  constructor(
    private readonly broker: BrokerAccess,
    private readonly state: ClusterState,
  ) {
    this.disposables.push(
      vscode.workspace.registerTextDocumentContentProvider(WORKER_LOG_SCHEME, this),
      vscode.workspace.onDidCloseTextDocument((d) => {
        if (d.uri.scheme === WORKER_LOG_SCHEME) {
          this.followers.delete(d.uri.toString());
        }
      }),
    );
    this.timer = setInterval(() => this.pollVisible(), POLL_MS);
  }

  toString(): string {
    return `WorkerLogs[${this.followers.size} followed]`;
  }

  /** The worker's stdout ("out") or stderr ("err"), opened beside the editor; resolves with the document. */
  async show(target: unknown, stream: LogStream): Promise<vscode.TextDocument | undefined> {
    const worker = await this.workerOf(target);
    if (!worker) {
      return undefined;
    }
    const client = await this.broker.ensureClient();
    if (!client) {
      return undefined;
    }
    const title = `${workerLabel(worker)} (${stream === "out" ? "stdout" : "stderr"})`;
    const uri = vscode.Uri.from({ scheme: WORKER_LOG_SCHEME, path: `/${title.replace(/[/\\]/g, "_")}.log`, query: `worker=${worker.id}&stream=${stream}` });
    const key = uri.toString();
    let follower = this.followers.get(key);
    if (!follower) {
      const f = new LogFollower(title, (offset) => client.getWorkerLogs(worker.id, stream, offset));
      try {
        await f.poll();
      } catch (err) {
        void vsapi.showErrorMessage(`Ray Sleuth: cannot read the ${stream === "out" ? "output" : "errors"} of ${workerLabel(worker)}: ${err instanceof Error ? err.message : String(err)}`);
        return undefined;
      }
      follower = f;
      this.followers.set(key, f);
    }
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.languages.setTextDocumentLanguage(doc, "log").then(undefined, (e: unknown) => swallow("Setting the log language failed", e));
    const editor = await vscode.window.showTextDocument(doc, { preview: false, viewColumn: vscode.ViewColumn.Beside });
    this.revealEnd(editor);
    log.info(`Following ${follower.path ?? title}`);
    return editor.document;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.followers.get(uri.toString())?.text ?? "# This log is no longer followed: open it again from the Cluster view.\n";
  }

  private async workerOf(target: unknown): Promise<WorkerInfo | undefined> {
    let id: string | undefined;
    if (typeof target === "string") {
      id = target;
    } else if (target && typeof target === "object" && "worker" in target) {
      id = (target as { worker?: WorkerInfo }).worker?.id;
    } else {
      id = await vsapi.executeCommand<string | undefined>(Commands.pickWorker);
    }
    const w = id ? this.state.workers.find((x) => x.id === id) : undefined;
    if (id && !w) {
      void vsapi.showErrorMessage(`Ray Sleuth: the worker ${id.slice(0, 8)} is not in the Cluster view any more.`);
    }
    return w;
  }

  /** Reads what is new for every followed log that an editor shows now. */
  private pollVisible(): void {
    const visible = new Set(vscode.window.visibleTextEditors.filter((e) => e.document.uri.scheme === WORKER_LOG_SCHEME).map((e) => e.document.uri.toString()));
    for (const key of visible) {
      const follower = this.followers.get(key);
      if (!follower || this.polling.has(key)) {
        continue;
      }
      this.polling.add(key);
      follower
        .poll()
        .then(
          (changed) => changed && this.update(key),
          (e: unknown) => {
            // The worker is gone (and its log with it) or the broker is: say so once, stop asking.
            log.warn(`Stopped following ${follower.title}: ${e instanceof Error ? e.message : String(e)}`);
            follower.stop(e instanceof Error ? e.message : String(e));
            this.update(key);
          },
        )
        .finally(() => this.polling.delete(key));
    }
  }

  /** New text: the document updates, and editors that showed its end keep showing it. */
  private update(key: string): void {
    const editors = vscode.window.visibleTextEditors.filter((e) => e.document.uri.toString() === key);
    const atEnd = editors.filter((e) => {
      const last = e.visibleRanges.at(-1)?.end.line ?? 0;
      return last >= e.document.lineCount - 2;
    });
    this.changed.fire(vscode.Uri.parse(key));
    // The document's new text arrives after the event: reveal once it is there.
    setTimeout(() => atEnd.forEach((e) => this.revealEnd(e)), 50);
  }

  private revealEnd(editor: vscode.TextEditor): void {
    const end = editor.document.lineAt(Math.max(0, editor.document.lineCount - 1)).range.end;
    editor.revealRange(new vscode.Range(end, end), vscode.TextEditorRevealType.Default);
  }

  dispose(): void {
    clearInterval(this.timer);
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
