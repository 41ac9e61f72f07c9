// Which interpreters the extension may run: never one named by a file another user can write
// (broker.json's "python" runs only when the interpreter and every folder above it are owned by
// the user or root and writable by no one else), and in Restricted Mode never one inside a
// workspace folder (a .venv of an untrusted folder is that folder's code). No vscode import.
import * as fs from "fs";
import * as path from "path";

/** The absolute path a command name runs: itself when it has a slash, else the first match on PATH. */
export function whichPython(command: string, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string | undefined {
  if (command.includes("/") || command.includes(path.sep)) {
    return path.resolve(cwd, command);
  }
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    const full = path.resolve(cwd, dir || ".", command);
    try {
      fs.accessSync(full, fs.constants.X_OK);
      if (fs.statSync(full).isFile()) {
        return full;
      }
    } catch {
      // not here
    }
  }
  return undefined;
}

function realpathOr(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return p;
  }
}

function within(child: string, folder: string): boolean {
  const rel = path.relative(folder, child);
  return rel === "" || (!!rel && !rel.startsWith("..") && !path.isAbsolute(rel));
}

/** The workspace folder `python` (a path or a name on PATH) lies in, by its path or its real path; undefined when none. */
export function folderHolding(python: string, folders: readonly string[], env: NodeJS.ProcessEnv = process.env): string | undefined {
  const full = whichPython(python, env);
  if (!full) {
    return undefined;
  }
  const real = realpathOr(full);
  return folders.find((f) => [full, real].some((p) => within(p, f) || within(p, realpathOr(f))));
}

/**
 * Why `python` must not run as the editor's user because someone else could have put it there or
 * changed it (undefined: it may run). Checked: the path as given and its real path, every folder
 * from the root down and the file itself: owned by the user or root, writable by no one else
 * (a world-writable folder only with the sticky bit, as /tmp, where the next entry's owner counts).
 */
export function interpreterProblem(python: string, uid: number | undefined = process.getuid?.()): string | undefined {
  if (uid === undefined) {
    return undefined; // no uids on this platform
  }
  if (!path.isAbsolute(python)) {
    return `"${python}" is not an absolute path`;
  }
  const trusted = new Set([uid, 0]);
  for (const p of new Set([path.normalize(python), realpathOr(python)])) {
    const parts = p.split(path.sep).filter(Boolean);
    for (let i = 0; i <= parts.length; i++) {
      const at = path.sep + parts.slice(0, i).join(path.sep);
      let st: fs.Stats;
      try {
        st = fs.lstatSync(at);
      } catch (err) {
        return `${at} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
      }
      if (!trusted.has(st.uid)) {
        return `${at} belongs to uid ${st.uid}, neither you (uid ${uid}) nor root`;
      }
      const sticky = (st.mode & fs.constants.S_IFMT) === fs.constants.S_IFDIR && st.mode & 0o1000;
      if (st.mode & 0o022 && !st.isSymbolicLink() && !sticky) {
        return `others can write ${at} (mode ${(st.mode & 0o7777).toString(8)})`;
      }
    }
  }
  const real = realpathOr(python);
  try {
    if (!fs.statSync(real).isFile()) {
      return `${real} is not a file`;
    }
  } catch (err) {
    return `${real} cannot be read (${(err as Error).message})`;
  }
  return undefined;
}

/** An interpreter to try, and whether a file (broker.json) named it rather than the user. */
export interface InterpreterCandidate {
  python: string;
  source: string;
  /** Named by a file (broker.json's "python"): runs only when interpreterProblem finds none. */
  fromFile?: boolean;
}

/**
 * The candidates that may run, in order, and why each other one may not: one named by a file must
 * pass interpreterProblem; with `restrictedFolders` (Restricted Mode: the workspace folders) none
 * inside those folders runs, whoever named it.
 */
export function screenCandidates<C extends InterpreterCandidate>(
  candidates: readonly C[],
  restrictedFolders: readonly string[] | undefined,
  env: NodeJS.ProcessEnv = process.env,
): { allowed: C[]; refused: string[] } {
  const allowed: C[] = [];
  const refused: string[] = [];
  for (const c of candidates) {
    const problem = c.fromFile ? interpreterProblem(whichPython(c.python, env) ?? c.python) : undefined;
    if (problem) {
      refused.push(`${c.source} "${c.python}" is not run: ${problem}, so another user could have put it there.`);
      continue;
    }
    const folder = restrictedFolders?.length ? folderHolding(c.python, restrictedFolders, env) : undefined;
    if (folder) {
      refused.push(`${c.source} "${c.python}" is not run: it is inside the workspace folder ${folder}, which is not trusted (Restricted Mode).`);
      continue;
    }
    allowed.push(c);
  }
  return { allowed, refused };
}

/**
 * The interpreters that may run `raysleuth lsp`, in order, and why each other may not: the
 * user's raySleuth.pythonPath alone when set; else broker.json's "python" (a file named it),
 * the Python extension's, python3 on PATH; each screened (screenCandidates), duplicates dropped.
 */
export function lspCandidates<C extends InterpreterCandidate>(
  configured: C | undefined,
  brokerPython: string | undefined,
  others: readonly C[],
  restrictedFolders: readonly string[] | undefined,
  env: NodeJS.ProcessEnv = process.env,
): { candidates: InterpreterCandidate[]; refused: string[] } {
  const all: InterpreterCandidate[] = configured
    ? [configured]
    : [...(brokerPython ? [{ python: brokerPython, source: "the broker's interpreter, from broker.json", fromFile: true }] : []), ...others];
  const { allowed, refused } = screenCandidates(all, restrictedFolders, env);
  return { candidates: allowed.filter((c, i) => allowed.findIndex((o) => o.python === c.python) === i), refused };
}
