// What the extension and `raysleuth lsp` (python_backend/raysleuth/lsp/server.py) say to each
// other besides standard LSP: names, shapes, and the texts the extension shows for them. Pure:
// no vscode import, so plain mocha tests it. A name changes here and in server.py together.

/** Server command of the `breakpoint()` quick fix: `[{uri, line}]` (1-based); registered by the language client. */
export const SET_CLUSTER_BREAKPOINT = "raySleuth.lsp.setClusterBreakpoint";
/** Server → client, once per change: {@link BrokerStatusParams}. */
export const BROKER_STATUS = "raySleuth/brokerStatus";
/** Server → client: a quick fix's breakpoint, {@link BreakpointAddedParams}. */
export const BREAKPOINT_ADDED = "raySleuth/breakpointAdded";
/** Client → server: one open document's editor breakpoints, {@link EditorBreakpointsParams}. */
export const EDITOR_BREAKPOINTS = "raySleuth/editorBreakpoints";
/** The owner the server's cluster breakpoints carry (live.py's OWNER). */
export const LSP_OWNER = "lsp";

/** `initializationOptions`: the broker settings, as the server's BrokerOptions reads them ("" = discover). */
export interface InitializationOptions {
  brokerAddress: string;
  tokenFile: string;
  stateDir: string;
}

export interface BrokerStatusParams {
  connected: boolean;
  url: string | null;
  message: string;
}

export interface BreakpointAddedParams {
  uri: string;
  /** The file as the server sees it (the cluster set's path). */
  path: string;
  /** 1-based. */
  line: number;
  /** True: the broker took it as a cluster breakpoint of owner "lsp"; false: the editor should set it. */
  cluster: boolean;
  message: string;
}

export interface EditorBreakpointsParams {
  uri: string;
  /** Enabled ones only, one per line and condition; `line` is 1-based. */
  breakpoints: { line: number; condition: string }[];
}

/** What raySleuth.revealWorkers gets from a lens: `{name, kind, workers: [ids]}`. */
export interface RevealArgs {
  name: string;
  kind: string;
  workers: string[];
}

/** A source breakpoint as plain data: `line` 0-based, as the editor has it. */
export interface PlainBreakpoint {
  line: number;
  condition?: string;
  enabled: boolean;
}

export function initializationOptions(setting: (key: keyof InitializationOptions) => string): InitializationOptions {
  return {
    brokerAddress: setting("brokerAddress").trim(),
    tokenFile: setting("tokenFile").trim(),
    stateDir: setting("stateDir").trim(),
  };
}

/** The notification's body for one document: enabled breakpoints, 1-based, sorted, without repeats. */
export function editorBreakpoints(uri: string, bps: readonly PlainBreakpoint[]): EditorBreakpointsParams {
  const seen = new Set<string>();
  const out: { line: number; condition: string }[] = [];
  for (const bp of bps) {
    const entry = { line: bp.line + 1, condition: bp.condition ?? "" };
    const key = `${entry.line}\u0000${entry.condition}`;
    if (bp.enabled && !seen.has(key)) {
      seen.add(key);
      out.push(entry);
    }
  }
  out.sort((a, b) => a.line - b.line || a.condition.localeCompare(b.condition));
  return { uri, breakpoints: out };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The lens's argument, or undefined for anything else (a stale lens, a hand-typed command). */
export function parseRevealArgs(arg: unknown): RevealArgs | undefined {
  if (!isRecord(arg) || !Array.isArray(arg.workers)) {
    return undefined;
  }
  return {
    name: typeof arg.name === "string" ? arg.name : "",
    kind: typeof arg.kind === "string" ? arg.kind : "",
    workers: arg.workers.filter((w): w is string => typeof w === "string" && w.length > 0),
  };
}

export function parseBrokerStatus(p: unknown): BrokerStatusParams | undefined {
  if (!isRecord(p) || typeof p.connected !== "boolean") {
    return undefined;
  }
  return { connected: p.connected, url: typeof p.url === "string" ? p.url : null, message: typeof p.message === "string" ? p.message : "" };
}

export function parseBreakpointAdded(p: unknown): BreakpointAddedParams | undefined {
  if (!isRecord(p) || typeof p.uri !== "string" || typeof p.line !== "number" || !Number.isInteger(p.line) || p.line < 1) {
    return undefined;
  }
  return {
    uri: p.uri,
    path: typeof p.path === "string" ? p.path : "",
    line: p.line,
    cluster: p.cluster === true,
    message: typeof p.message === "string" ? p.message : "",
  };
}

/** The status bar's words for the server's broker status: the live parts say once that none is there. */
export function brokerStatusText(s: BrokerStatusParams): string {
  return s.connected
    ? `$(plug) Ray Sleuth: code lenses follow the broker at ${s.url ?? "?"}`
    : "$(debug-disconnect) Ray Sleuth: no broker connected — code lenses and hovers show live workers once one is";
}

/** What the interpreter check found (interpreterProbe.ts). */
export type ProbeResult =
  | { kind: "ok"; python: string; version: string }
  | { kind: "notFound"; python: string; detail: string }
  | { kind: "missing"; python: string; version: string; modules: string[] }
  | { kind: "failed"; python: string; detail: string };

/** Python that prints what the server needs and lacks, as one JSON line (it imports nothing of them). */
export const PROBE_SCRIPT =
  "import importlib.util as u, json, sys; " +
  'print(json.dumps({"version": "%d.%d.%d" % sys.version_info[:3], ' +
  '"missing": [m for m in ("raysleuth", "pygls", "lsprotocol") if u.find_spec(m) is None]}))';

/** The probe's stdout as a result; anything unreadable is a failure that quotes it. */
export function parseProbeOutput(python: string, stdout: string): ProbeResult {
  const line = stdout.trim().split("\n").pop() ?? "";
  try {
    const v = JSON.parse(line) as unknown;
    if (isRecord(v) && typeof v.version === "string" && Array.isArray(v.missing)) {
      const modules = v.missing.filter((m): m is string => typeof m === "string");
      return modules.length ? { kind: "missing", python, version: v.version, modules } : { kind: "ok", python, version: v.version };
    }
  } catch {
    // not JSON: told below with what it printed
  }
  return { kind: "failed", python, detail: `it printed ${JSON.stringify(line.slice(0, 200))}` };
}

/**
 * One sentence for a probe that did not pass, saying what to do next; undefined for "ok".
 * `source` says where the interpreter came from ("setting raySleuth.pythonPath", ...).
 */
export function probeProblem(r: ProbeResult, source: string): string | undefined {
  const off = "or turn raySleuth.languageServer.enabled off";
  switch (r.kind) {
    case "ok":
      return undefined;
    case "notFound":
      return `Ray Sleuth: the language server is not running: the interpreter "${r.python}" (${source}) was not found (${r.detail}). Set raySleuth.pythonPath or pick an interpreter in the Python extension, ${off}.`;
    case "missing": {
      const what = r.modules.includes("raysleuth") ? "raysleuth is not installed" : `${r.modules.join(" and ")} ${r.modules.length > 1 ? "are" : "is"} missing`;
      const old = /^3\.(\d+)\./.exec(r.version);
      const tooOld = old && Number(old[1]) < 11 ? ` raysleuth needs Python 3.11 or newer; this one is ${r.version}.` : "";
      return (
        `Ray Sleuth: the language server is not running: in "${r.python}" (${source}) ${what}.${tooOld} Install it with "${r.python} -m pip install 'raysleuth[lsp]'" ` +
        `and run "Ray Sleuth: Restart Language Server", set raySleuth.pythonPath to an interpreter that has it, ${off}.`
      );
    }
    case "failed":
      return `Ray Sleuth: the language server is not running: checking "${r.python}" (${source}) failed (${r.detail}). Set raySleuth.pythonPath to a working Python 3.11+, ${off}.`;
  }
}

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error";

const PY_LOG_LINE = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;
const PY_LEVELS: Record<string, LogLevel> = { DEBUG: "debug", INFO: "info", WARNING: "warn", ERROR: "error", CRITICAL: "error" };

/**
 * One line of the server's stderr (its log: "2026-… INFO raysleuth.lsp.live: …", server.py's
 * format) as a level and text for the extension's log channel, which stamps its own time. A line
 * of another shape (a traceback's) keeps the level of the line before it.
 */
export function serverLogLine(line: string, previous: LogLevel): { level: LogLevel; text: string } {
  const m = PY_LOG_LINE.exec(line);
  return m ? { level: PY_LEVELS[m[1]], text: `[lsp] ${m[2]}` } : { level: previous, text: `[lsp] ${line}` };
}
