// Asks an interpreter whether it can run `raysleuth lsp` (raysleuth, pygls, lsprotocol) before the
// language client starts it, so a missing package is said once with what to do, not as a server that
// crashes five times. No vscode import; finds modules without importing them (fast, no side effects).
import { execFile } from "child_process";
import { PROBE_SCRIPT, ProbeResult, parseProbeOutput, probeProblem } from "./protocol";

const PROBE_TIMEOUT_MS = 20_000;

export function probeInterpreter(python: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<ProbeResult> {
  return new Promise((resolve) => {
    execFile(python, ["-c", PROBE_SCRIPT], { timeout: timeoutMs, windowsHide: true }, (err, stdout, stderr) => {
      const code = (err as NodeJS.ErrnoException | null)?.code;
      if (code === "ENOENT" || code === "EACCES") {
        resolve({ kind: "notFound", python, detail: code });
      } else if (err) {
        const last = String(stderr).trim().split("\n").pop() ?? "";
        resolve({ kind: "failed", python, detail: err.killed ? `no answer in ${timeoutMs / 1000} s` : last || err.message });
      } else {
        resolve(parseProbeOutput(python, String(stdout)));
      }
    });
  });
}

/** The first of `candidates` that can run the server, and the problem of each one tried before it. */
export async function firstRunnable<C extends { python: string; source: string }>(
  candidates: readonly C[],
  probe: (python: string) => Promise<ProbeResult> = probeInterpreter,
): Promise<{ chosen: C | undefined; problems: string[] }> {
  const problems: string[] = [];
  for (const c of candidates) {
    const problem = probeProblem(await probe(c.python), c.source);
    if (!problem) {
      return { chosen: c, problems };
    }
    problems.push(problem);
  }
  return { chosen: undefined, problems };
}
