// Logpoint lines of the workers (`log` stream events): always to the output
// channel "Ray Sleuth Logpoints", and to the Debug Console while a Ray Sleuth
// debug session runs, each prefixed with its rank: "[rank 3] loss=0.25". In the
// channel that prefix links to the worker's output (raySleuth.showWorkerOutput).
import * as vscode from "vscode";
import { Commands, DEBUG_TYPE, LOGPOINT_CHANNEL_NAME } from "../constants";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { LogpointLine } from "../broker/types";
import { WorkerSessionService } from "../debug/workerSessions";
import { logpointText } from "./logpointText";

const KEEP_RECENT = 1000;

export class LogpointService implements vscode.Disposable, vscode.DocumentLinkProvider {
  readonly channel: vscode.OutputChannel;
  /** The last lines written (tests read them). */
  readonly recent: string[] = [];
  private readonly written = new vscode.EventEmitter<string>();
  /** Fired with each line as it is written. */
  readonly onDidWrite = this.written.event;
  private readonly disposables: vscode.Disposable[] = [this.written];
  /** Line text → the worker that wrote it (the newest KEEP_RECENT lines): what a link opens. */
  private readonly writers = new Map<string, string>();

  constructor(
    connection: BrokerConnectionService,
    private readonly sessions: WorkerSessionService,
  ) {
    this.channel = vscode.window.createOutputChannel(LOGPOINT_CHANNEL_NAME);
    this.disposables.push(
      this.channel,
      // An output channel is a document of the "output" scheme: its lines get links like a file's.
      vscode.languages.registerDocumentLinkProvider({ scheme: "output" }, this),
      connection.onStreamEvent((e) => {
        if (e.event === "log" && e.data && typeof e.data === "object" && typeof (e.data as LogpointLine).message === "string") {
          this.write(e.data as LogpointLine);
        }
      }),
    );
  }

  write(line: LogpointLine): void {
    const text = logpointText(line);
    this.channel.appendLine(text);
    const active = vscode.debug.activeDebugSession;
    if (active?.type === DEBUG_TYPE || this.sessions.clusterSession) {
      vscode.debug.activeDebugConsole.appendLine(text);
    }
    this.recent.push(text);
    this.writers.delete(text);
    this.writers.set(text, line.worker);
    if (this.recent.length > KEEP_RECENT) {
      this.recent.splice(0, this.recent.length - KEEP_RECENT);
    }
    if (this.writers.size > KEEP_RECENT) {
      this.writers.delete(this.writers.keys().next().value as string);
    }
    this.written.fire(text);
  }

  /** "[rank 3]" at the start of a logpoint line → that worker's stdout, followed live. */
  provideDocumentLinks(doc: vscode.TextDocument): vscode.DocumentLink[] {
    const links: vscode.DocumentLink[] = [];
    if (this.writers.size === 0) {
      return links;
    }
    for (let i = 0; i < doc.lineCount; i++) {
      const text = doc.lineAt(i).text;
      const worker = text.startsWith("[") ? this.writers.get(text) : undefined;
      if (!worker) {
        continue;
      }
      const args = encodeURIComponent(JSON.stringify([worker]));
      const link = new vscode.DocumentLink(new vscode.Range(i, 0, i, text.indexOf("]") + 1), vscode.Uri.parse(`command:${Commands.showWorkerOutput}?${args}`));
      link.tooltip = "Open this worker's output (its Ray worker log)";
      links.push(link);
    }
    return links;
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
