// Starts a local broker (`<python> -m raysleuth broker --state-dir DIR`) and
// waits for its one JSON ready line on stdout. Owns the child: stop() ends it.
// No vscode import.
import { ChildProcess, spawn } from "child_process";
import * as readline from "readline";
import { BrokerReadyInfo } from "./types";

export interface BrokerProcessOptions {
  python: string;
  stateDir: string;
  /** Extra arguments after `broker`, e.g. ["--address", "auto"]. */
  extraArgs?: string[];
  readyTimeoutMs?: number;
  /** Its working directory and extra environment (Restricted Mode: outside the folder, PYTHONSAFEPATH). */
  cwd?: string;
  env?: Record<string, string>;
  /** Receives the broker's stderr and any non-JSON stdout, line by line. */
  onOutput?: (line: string) => void;
}

export class BrokerProcess {
  private child: ChildProcess | undefined;

  constructor(private readonly options: BrokerProcessOptions) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  toString(): string {
    return `BrokerProcess[pid=${this.pid ?? "-"}]`;
  }

  /** Spawns the broker; resolves with its ready line, rejects if it exits or times out first. */
  start(): Promise<BrokerReadyInfo> {
    const { python, stateDir, extraArgs = [], readyTimeoutMs = 60_000, onOutput, cwd, env } = this.options;
    const args = ["-m", "raysleuth", "broker", "--state-dir", stateDir, ...extraArgs];
    const child = spawn(python, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env }, ...(cwd ? { cwd } : {}) });
    this.child = child;
    const tail: string[] = [];
    const remember = (line: string) => {
      tail.push(line);
      if (tail.length > 20) {
        tail.shift();
      }
      onOutput?.(line);
    };
    forEachLine(child.stderr, remember);

    return new Promise<BrokerReadyInfo>((resolve, reject) => {
      let settled = false;
      const settle = (fn: () => void) => {
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          fn();
        }
      };
      const timer = setTimeout(() => {
        settle(() => {
          this.stop();
          reject(new Error(`The broker started with "${python} ${args.join(" ")}" printed no ready line within ${readyTimeoutMs / 1000} s.${lastLines(tail)}`));
        });
      }, readyTimeoutMs);
      forEachLine(child.stdout, (line) => {
        const trimmed = line.trim();
        if (!settled && trimmed.startsWith("{")) {
          try {
            const info = JSON.parse(trimmed) as BrokerReadyInfo;
            if (info.ready && typeof info.http === "string") {
              settle(() => resolve(info));
              return;
            }
          } catch {
            // Not the ready line: it goes to the output below, like any other line.
          }
        }
        remember(line);
      });
      child.on("error", (err: NodeJS.ErrnoException) => {
        settle(() =>
          reject(
            new Error(
              err.code === "ENOENT"
                ? `Cannot start the broker: the interpreter "${python}" was not found. Set raySleuth.pythonPath or pick an interpreter in the Python extension.`
                : `Cannot start the broker with "${python}": ${err.message}`,
            ),
          ),
        );
      });
      child.on("exit", (code, signal) => {
        settle(() =>
          reject(
            new Error(
              `The broker exited (${signal ?? `status ${code}`}) before it was ready. ` +
                `Is raysleuth installed for "${python}"? Try "${python} -m pip install raysleuth" or set raySleuth.pythonPath.${lastLines(tail)}`,
            ),
          ),
        );
      });
    });
  }

  /** Asks the broker to exit (SIGTERM; it exits within 10 s), then kills it if it does not. */
  stop(): void {
    const child = this.child;
    if (!child || !this.running) {
      return;
    }
    child.kill("SIGTERM");
    const timer = setTimeout(() => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL");
      }
    }, 10_000);
    timer.unref();
    child.once("exit", () => clearTimeout(timer));
  }
}

function lastLines(tail: string[]): string {
  return tail.length ? `\nLast output:\n${tail.slice(-8).join("\n")}` : "";
}

function forEachLine(stream: NodeJS.ReadableStream | null, fn: (line: string) => void): void {
  if (stream) {
    readline.createInterface({ input: stream, crlfDelay: Infinity }).on("line", fn);
  }
}
