// Logpoint lines of the workers (`log` stream events): always to the output
// channel "Ray Sleuth Logpoints", and to the Debug Console while a Ray Sleuth
// debug session runs, each prefixed with its rank: "[rank 3] loss=0.25".
import * as vscode from "vscode";
import { DEBUG_TYPE, LOGPOINT_CHANNEL_NAME } from "../constants";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { LogpointLine } from "../broker/types";
import { WorkerSessionService } from "../debug/workerSessions";
import { logpointText } from "./logpointText";

const KEEP_RECENT = 1000;

export class LogpointService implements vscode.Disposable {
  readonly channel: vscode.OutputChannel;
  /** The last lines written (tests read them). */
  readonly recent: string[] = [];
  private readonly written = new vscode.EventEmitter<string>();
  /** Fired with each line as it is written. */
  readonly onDidWrite = this.written.event;
  private readonly disposables: vscode.Disposable[] = [this.written];

  constructor(
    connection: BrokerConnectionService,
    private readonly sessions: WorkerSessionService,
  ) {
    this.channel = vscode.window.createOutputChannel(LOGPOINT_CHANNEL_NAME);
    this.disposables.push(
      this.channel,
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
    if (this.recent.length > KEEP_RECENT) {
      this.recent.splice(0, this.recent.length - KEEP_RECENT);
    }
    this.written.fire(text);
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
