// Picks the Python interpreter that runs `python -m raysleuth ...`: raySleuth.pythonPath, else
// (for the language server) the broker's own, else the Python extension's active one, else python3.
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

export interface PythonChoice {
  python: string;
  /** Where it came from, in words, for the log and for messages. */
  source: string;
}

function configuredPython(): PythonChoice | undefined {
  const configured = getSetting<string>(Settings.pythonPath, "").trim();
  return configured ? { python: configured, source: "setting raySleuth.pythonPath" } : undefined;
}

async function pythonExtensionInterpreter(): Promise<PythonChoice | undefined> {
  const ext = getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
  if (!ext || !vscode.workspace.isTrusted) {
    return undefined; // in Restricted Mode it may be a virtualenv inside the folder: never run it
  }
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
  return undefined;
}

const PATH_PYTHON: PythonChoice = { python: "python3", source: "python3 on PATH" };

/** The interpreter that starts a local broker: raySleuth.pythonPath, else the Python extension's, else python3. */
export async function resolvePythonPath(): Promise<PythonChoice> {
  const choice = configuredPython() ?? (await pythonExtensionInterpreter());
  if (!choice) {
    log.debug("No interpreter configured; using python3 from PATH");
  }
  return choice ?? PATH_PYTHON;
}

/**
 * Interpreters that may run `raysleuth lsp`, to try in order: raySleuth.pythonPath alone when it
 * is set (the user's word); else the broker's own interpreter (it has raysleuth: `python` in
 * broker.json), the Python extension's, python3.
 */
export async function pythonCandidates(brokerPython: string | undefined): Promise<PythonChoice[]> {
  const configured = configuredPython();
  if (configured) {
    return [configured];
  }
  const out: PythonChoice[] = [];
  if (brokerPython) {
    out.push({ python: brokerPython, source: "the broker's interpreter, from broker.json" });
  }
  const ext = await pythonExtensionInterpreter();
  if (ext) {
    out.push(ext);
  }
  out.push(PATH_PYTHON);
  return out.filter((c, i) => out.findIndex((o) => o.python === c.python) === i);
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
