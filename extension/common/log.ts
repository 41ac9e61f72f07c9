// The extension's one LogOutputChannel ("Ray Sleuth"). Everything logs through
// here; the only other channel is "Ray Sleuth Logpoints" (debug/logpoints.ts),
// which carries the workers' logpoint lines, not the extension's log.
import * as vscode from "vscode";
import { LOG_CHANNEL_NAME } from "../constants";

let channel: vscode.LogOutputChannel | undefined;

export function createLog(): vscode.LogOutputChannel {
  channel ??= vscode.window.createOutputChannel(LOG_CHANNEL_NAME, { log: true });
  return channel;
}

/** The channel, or a no-op logger before activation (for code run by unit tests). */
export const log = {
  trace: (msg: string, ...args: unknown[]) => channel?.trace(msg, ...args),
  debug: (msg: string, ...args: unknown[]) => channel?.debug(msg, ...args),
  info: (msg: string, ...args: unknown[]) => channel?.info(msg, ...args),
  warn: (msg: string, ...args: unknown[]) => channel?.warn(msg, ...args),
  error: (msg: string | Error, ...args: unknown[]) => channel?.error(msg, ...args),
  show: () => channel?.show(true),
};

/** Logs an error that must not stop the caller (the one explicit way to swallow one). */
export function swallow(what: string, err: unknown): void {
  log.error(`${what}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
}
