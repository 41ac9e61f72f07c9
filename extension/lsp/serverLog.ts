// The output channel the language client writes to: the server's stderr (its Python log) and the
// client's own lines go into the extension's one log channel, line by line, at their own levels,
// so the "Ray Sleuth" output shows one timeline. Never writes to stdout.
import * as vscode from "vscode";
import { LogLevel, serverLogLine } from "./protocol";

export class ServerLogChannel implements vscode.OutputChannel {
  readonly name: string;
  /** The text after the last newline, until its line ends. */
  private partial = "";
  private level: LogLevel = "info";

  constructor(private readonly log: vscode.LogOutputChannel) {
    this.name = log.name;
  }

  append(value: string): void {
    const lines = (this.partial + value).split(/\r?\n/);
    this.partial = lines.pop() ?? "";
    for (const line of lines) {
      if (line.trim()) {
        const { level, text } = serverLogLine(line, this.level);
        this.level = level;
        this.log[level](text);
      }
    }
  }

  appendLine(value: string): void {
    this.append(`${value}\n`);
  }

  replace(value: string): void {
    this.append(value);
  }

  clear(): void {
    // The extension's log is shared: the language client never clears it.
  }

  show(columnOrPreserveFocus?: vscode.ViewColumn | boolean, preserveFocus?: boolean): void {
    this.log.show(typeof columnOrPreserveFocus === "boolean" ? columnOrPreserveFocus : preserveFocus);
  }

  hide(): void {
    this.log.hide();
  }

  dispose(): void {
    // The channel belongs to the extension (common/log.ts), not to the language client.
  }
}
