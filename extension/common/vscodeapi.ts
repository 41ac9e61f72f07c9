// A thin seam over the parts of the vscode API that show things or read
// settings, so tests can stub them. No logic lives here. A message that
// cannot be shown is logged, never lost: callers may fire and forget.
import * as vscode from "vscode";
import { SETTINGS_SECTION } from "../constants";
import { swallow } from "./log";

/** The same Thenable, except that a failure is logged and becomes undefined. */
function logged<T>(what: string, p: Thenable<T>): Thenable<T | undefined> {
  return p.then(
    (v) => v,
    (e: unknown) => {
      swallow(what, e);
      return undefined;
    },
  );
}

export function getSetting<T>(key: string, fallback: T): T {
  return vscode.workspace.getConfiguration(SETTINGS_SECTION).get<T>(key, fallback);
}

/** Calls listener when one of the given raySleuth.* settings changes. */
export function onDidChangeSettings(keys: readonly string[], listener: () => void): vscode.Disposable {
  return vscode.workspace.onDidChangeConfiguration((e) => {
    if (keys.some((k) => e.affectsConfiguration(`${SETTINGS_SECTION}.${k}`))) {
      listener();
    }
  });
}

export function showErrorMessage<T extends string>(message: string, ...actions: T[]): Thenable<T | undefined> {
  return logged(`Showing the error "${message}" failed`, vscode.window.showErrorMessage(message, ...actions));
}

export function showWarningMessage<T extends string>(message: string, ...actions: T[]): Thenable<T | undefined> {
  return logged(`Showing the warning "${message}" failed`, vscode.window.showWarningMessage(message, ...actions));
}

export function showInformationMessage<T extends string>(message: string, ...actions: T[]): Thenable<T | undefined> {
  return logged(`Showing the message "${message}" failed`, vscode.window.showInformationMessage(message, ...actions));
}

export function registerCommand(id: string, fn: (...args: unknown[]) => unknown): vscode.Disposable {
  return vscode.commands.registerCommand(id, fn);
}

export function executeCommand<T = unknown>(id: string, ...args: unknown[]): Thenable<T> {
  return vscode.commands.executeCommand<T>(id, ...args);
}

export function setContext(key: string, value: unknown): Thenable<unknown> {
  return logged(`Setting the context key ${key} failed`, vscode.commands.executeCommand("setContext", key, value));
}

export function openSettings(query: string): Thenable<unknown> {
  return logged("Opening the settings failed", vscode.commands.executeCommand("workbench.action.openSettings", query));
}

export function getExtension<T>(id: string): vscode.Extension<T> | undefined {
  return vscode.extensions.getExtension<T>(id);
}

export function createStatusBarItem(id: string, alignment: vscode.StatusBarAlignment, priority: number): vscode.StatusBarItem {
  return vscode.window.createStatusBarItem(id, alignment, priority);
}

export function createTreeView<T>(viewId: string, options: vscode.TreeViewOptions<T>): vscode.TreeView<T> {
  return vscode.window.createTreeView(viewId, options);
}

export function withProgress<R>(title: string, task: () => Promise<R>): Thenable<R> {
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title }, task);
}

export function setStatusBarMessage(text: string, hideAfterMs: number): vscode.Disposable {
  return vscode.window.setStatusBarMessage(text, hideAfterMs);
}
