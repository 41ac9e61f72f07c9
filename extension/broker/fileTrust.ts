// Files the extension obeys are trusted only when the user owns them, by the CLI's rules
// (python_backend/raysleuth/client.py read_broker_file / read_token_file, shared/privfiles.py
// check_state_dir): the state dir is a folder of ours, no symlink, that others cannot write;
// broker.json is a plain file of ours that others cannot write; the token file is a plain file of
// ours that only we can read, opened with O_NOFOLLOW and checked on the open descriptor (fstat),
// and it is the state dir's own `token`, never a path that broker.json names. A refusal is an
// UntrustedFileError whose message says what was found and what to do. No vscode import.
//
// Where the platform has no uids (Windows: no process.getuid), nothing can be checked here.
import * as fs from "fs";
import * as path from "path";

export const TOKEN_FILE = "token";
/** broker.json is a few hundred bytes; more is not a broker's. */
const MAX_BROKER_FILE = 64 * 1024;
const MAX_TOKEN_FILE = 4096;

/** A file or folder refused because another user could have planted or changed it. */
export class UntrustedFileError extends Error {
  constructor(
    readonly what: string,
    readonly hint: string,
    readonly file: string,
  ) {
    super(`${what} ${hint}`);
    this.name = "UntrustedFileError";
  }
}

/** This process's uid; undefined where the platform has none (then nothing is checked). */
export function myUid(): number | undefined {
  return process.getuid?.();
}

/** `-rw-rw-rw-` / `drwxrwxrwx` of a mode, for messages. */
export function modeText(mode: number): string {
  const kind = (mode & fs.constants.S_IFMT) === fs.constants.S_IFDIR ? "d" : (mode & fs.constants.S_IFMT) === fs.constants.S_IFLNK ? "l" : "-";
  const bits = "rwxrwxrwx";
  return kind + [...bits].map((c, i) => (mode & (0o400 >> i) ? c : "-")).join("");
}

/** No link followed; no wait on a FIFO put in a file's place (fstat then refuses it). */
const OPEN_FLAGS = fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0);

/** Throws unless `dir` is a folder of ours, not a symlink, that others cannot write; "missing" when it does not exist. */
export function checkStateDir(dir: string): "ok" | "missing" {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      return "missing";
    }
    throw new UntrustedFileError(`Cannot use the state dir ${dir}: ${(err as Error).message}.`, "Set raySleuth.stateDir to a folder of yours.", dir);
  }
  const uid = myUid();
  if (st.isSymbolicLink()) {
    let to = "?";
    try {
      to = fs.readlinkSync(dir);
    } catch {
      // the message says "?"
    }
    throw new UntrustedFileError(
      `The state dir ${dir} is a symbolic link (to ${to}): whoever can change the link steers Ray Sleuth, so it is not used.`,
      "Set raySleuth.stateDir to the real folder, if it is yours (or remove the link: the broker makes the folder).",
      dir,
    );
  }
  if (!st.isDirectory()) {
    throw new UntrustedFileError(`The state dir ${dir} is not a folder.`, "Set raySleuth.stateDir to a folder of yours.", dir);
  }
  if (uid === undefined) {
    return "ok";
  }
  if (st.uid !== uid) {
    throw new UntrustedFileError(
      `The state dir ${dir} belongs to uid ${st.uid}, not to you (uid ${uid}): its broker.json and token are not used.`,
      "Use a state dir of your own: set raySleuth.stateDir (or leave it empty for ~/.raysleuth).",
      dir,
    );
  }
  if (st.mode & 0o022) {
    throw new UntrustedFileError(
      `Others can write the state dir ${dir} (${modeText(st.mode)}): a broker.json planted there would steer Ray Sleuth to another process, so it is not used.`,
      `Run "chmod 700 ${dir}" after checking that nothing in it was planted, or set raySleuth.stateDir to another folder.`,
      dir,
    );
  }
  return "ok";
}

/**
 * Reads `file` through a descriptor opened with O_NOFOLLOW and checked with fstat: a plain file of
 * ours that others cannot write (`privateOnly`: that others cannot read or write). ENOENT is
 * thrown as it is (the caller decides what a missing file means).
 */
function readOwnFile(file: string, label: string, privateOnly: boolean, maxBytes: number, hint: string): string {
  let fd: number;
  try {
    fd = fs.openSync(file, OPEN_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ELOOP") {
      throw new UntrustedFileError(`${label} ${file} is a symbolic link: only a plain file of yours is read.`, hint, file);
    }
    throw err;
  }
  try {
    const st = fs.fstatSync(fd);
    const uid = myUid();
    const otherBits = privateOnly ? 0o077 : 0o022;
    if (!st.isFile() || (uid !== undefined && (st.uid !== uid || st.mode & otherBits))) {
      const rule = privateOnly ? "only you can read" : "only you can write";
      throw new UntrustedFileError(
        `${label} ${file} (${modeText(st.mode)}, uid ${st.uid}) is not a plain file of yours that ${rule}: it may have been planted, so it is not used.`,
        hint,
        file,
      );
    }
    const buf = Buffer.alloc(maxBytes);
    const n = fs.readSync(fd, buf, 0, maxBytes, 0);
    return buf.subarray(0, n).toString("utf8");
  } finally {
    fs.closeSync(fd);
  }
}

/** The state dir's broker.json as text, after the state dir and the file passed the checks; undefined when either is missing. */
export function readBrokerFileText(stateDir: string, name: string): string | undefined {
  if (checkStateDir(stateDir) === "missing") {
    return undefined;
  }
  const file = path.join(stateDir, name);
  try {
    return readOwnFile(file, "The broker file", false, MAX_BROKER_FILE, 'Delete it and start the broker again ("raysleuth broker").');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      return undefined;
    }
    throw err;
  }
}

/** A token file's token: a plain file of ours only we can read, never through a link; throws when unreadable or empty. */
export function readTokenFile(file: string): string {
  const hint = `Delete it and restart the broker (a new token is made), or run "chmod 600 ${file}" if it never left your hands.`;
  let text: string;
  try {
    text = readOwnFile(file, "The broker token file", true, MAX_TOKEN_FILE, hint);
  } catch (err) {
    if (err instanceof UntrustedFileError) {
      throw err;
    }
    throw new UntrustedFileError(
      `Cannot read the broker token file ${file}: ${(err as Error).message}.`,
      "Set raySleuth.tokenFile or RAYSLEUTH_TOKEN, or run as the user who started the broker.",
      file,
    );
  }
  const token = text.trim();
  if (!token) {
    throw new UntrustedFileError(`The broker token file ${file} is empty.`, "Restart the broker: it writes a new one.", file);
  }
  return token;
}

/** The token of a state dir's broker: `<stateDir>/token` only (whatever token_file broker.json names), after the state dir's check. */
export function readStateDirToken(stateDir: string): string {
  if (checkStateDir(stateDir) === "missing") {
    throw new UntrustedFileError(`The state dir ${stateDir} does not exist, so it holds no token.`, 'Start a broker ("raysleuth broker") or set raySleuth.stateDir.', stateDir);
  }
  return readTokenFile(path.join(stateDir, TOKEN_FILE));
}
