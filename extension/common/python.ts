// Picks the Python interpreter that runs `python -m raysleuth ...`:
// raySleuth.pythonPath, else the Python extension's active interpreter, else python3.
import * as vscode from "vscode";
import { Settings } from "../constants";
import { log, swallow } from "./log";
import { getExtension, getSetting } from "./vscodeapi";

const PYTHON_EXTENSION_ID = "ms-python.python";

/** The part of the Python extension's API that is used here. */
interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment(env: { path: string }): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
  };
}

export async function resolvePythonPath(): Promise<{ python: string; source: string }> {
  const configured = getSetting<string>(Settings.pythonPath, "").trim();
  if (configured) {
    return { python: configured, source: "setting raySleuth.pythonPath" };
  }
  const ext = getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
  if (ext) {
    try {
      const api = ext.isActive ? ext.exports : await ext.activate();
      const envs = api?.environments;
      if (envs) {
        const active = envs.getActiveEnvironmentPath(vscode.workspace.workspaceFolders?.[0]?.uri);
        const resolved = await envs.resolveEnvironment(active);
        const exe = resolved?.executable.uri?.fsPath ?? active.path;
        if (exe) {
          return { python: exe, source: "the Python extension's active interpreter" };
        }
      }
    } catch (err) {
      swallow("Reading the Python extension's interpreter failed", err);
    }
  }
  log.debug("No interpreter configured; using python3 from PATH");
  return { python: "python3", source: "python3 on PATH" };
}

/**
 * Calls listener when the Python extension's active interpreter changes (the language server
 * restarts on it); undefined without that extension or its environments API.
 */
export async function onDidChangePythonInterpreter(listener: () => void): Promise<vscode.Disposable | undefined> {
  const ext = getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
  if (!ext) {
    return undefined;
  }
  try {
    const api = ext.isActive ? ext.exports : await ext.activate();
    return api?.environments?.onDidChangeActiveEnvironmentPath?.(() => listener());
  } catch (err) {
    swallow("Watching the Python extension's interpreter failed", err);
    return undefined;
  }
}
