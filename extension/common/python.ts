// Picks the Python interpreter that runs `python -m raysleuth ...`: raySleuth.pythonPath, else
// (for the language server) the broker's own, else the Python extension's active one, else python3.
// Never one that broker.json names unless no other user can have put it there, and in Restricted
// Mode never one inside a workspace folder (interpreterTrust.ts).
import * as path from "path";
import * as vscode from "vscode";
import { Settings } from "../constants";
import { InterpreterCandidate, lspCandidates, screenCandidates } from "./interpreterTrust";
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

export interface PythonChoice extends InterpreterCandidate {
  python: string;
  /** Where it came from, in words, for the log and for messages. */
  source: string;
}

/** In Restricted Mode the workspace folders (nothing inside them runs); undefined in a trusted window. */
export function restrictedFolders(): string[] | undefined {
  if (vscode.workspace.isTrusted) {
    return undefined;
  }
  return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file").map((f) => f.uri.fsPath);
}

/**
 * Where a Python process of Ray Sleuth starts and what it is told, so that `-m raysleuth` never
 * imports a `raysleuth` of an untrusted folder: in Restricted Mode the root folder as its working
 * directory and PYTHONSAFEPATH=1 (Python 3.11+: no working directory on sys.path); else nothing.
 */
export function safeSpawn(): { cwd?: string; env: Record<string, string> } {
  return restrictedFolders() ? { cwd: path.parse(process.cwd()).root || "/", env: { PYTHONSAFEPATH: "1" } } : { env: {} };
}

function screen(candidates: PythonChoice[]): { allowed: PythonChoice[]; refused: string[] } {
  const result = screenCandidates(candidates, restrictedFolders());
  result.refused.forEach((r) => log.warn(`Ray Sleuth: ${r}`));
  return result;
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

/** The interpreter that starts a local broker: raySleuth.pythonPath, else the Python extension's, else python3; throws when none may run. */
export async function resolvePythonPath(): Promise<PythonChoice> {
  const choice = configuredPython() ?? (await pythonExtensionInterpreter());
  if (!choice) {
    log.debug("No interpreter configured; using python3 from PATH");
  }
  const { allowed, refused } = screen([choice ?? PATH_PYTHON]);
  if (!allowed.length) {
    throw new Error(`Cannot start a broker: ${refused.join(" ")} Set raySleuth.pythonPath (user settings) to an interpreter outside the folder, or trust the folder.`);
  }
  return allowed[0];
}

/**
 * Interpreters that may run `raysleuth lsp`, to try in order: raySleuth.pythonPath alone when it
 * is set (the user's word); else the broker's own interpreter (it has raysleuth: `python` in
 * broker.json, a file that passed fileTrust's checks; the interpreter must pass its own), the
 * Python extension's, python3. `refused`: why each one left out may not run.
 */
export async function pythonCandidates(brokerPython: string | undefined): Promise<{ candidates: PythonChoice[]; refused: string[] }> {
  const configured = configuredPython();
  const ext = configured ? undefined : await pythonExtensionInterpreter();
  const result = lspCandidates(configured, brokerPython, [...(ext ? [ext] : []), PATH_PYTHON], restrictedFolders());
  result.refused.forEach((r) => log.warn(`Ray Sleuth: ${r}`));
  return result;
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
