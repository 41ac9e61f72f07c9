// Another local user's listener, for the tests of issue #37: a Python process run as `nobody`
// (runuser) that listens on a loopback port, records how many bytes each connection brought
// (and whether an Authorization header or a ticket/token was among them), and optionally relays
// every connection to an upstream port (a relay on a dead broker's port that forwards the hello
// proof to the live broker). It exits when its stdin closes. Needs root (runuser) and /usr/bin/python3.
import { ChildProcess, spawn } from "child_process";
import * as fs from "fs";
import * as readline from "readline";

const SCRIPT = String.raw`
import os, socket, sys, threading
upstream = int(sys.argv[1])
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.bind(("127.0.0.1", 0))
srv.listen(64)
print("port %d uid %d" % (srv.getsockname()[1], os.getuid()), flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
lock = threading.Lock()

def pump(a, b, got):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            if got is not None:
                got.append(d)
            if b is not None:
                b.sendall(d)
    except OSError:
        pass
    finally:
        if b is not None:
            try:
                b.shutdown(socket.SHUT_WR)
            except OSError:
                pass

def serve(c):
    got = []
    u = socket.create_connection(("127.0.0.1", upstream)) if upstream else None
    t = threading.Thread(target=pump, args=(u, c, None)) if u else None
    if t:
        t.start()
    pump(c, u, got)
    if t:
        t.join()
    data = b"".join(got).lower()
    secret = b"authorization:" in data or b'"token"' in data or b'"ticket"' in data
    with lock:
        print("conn %d %s" % (len(data), "secret" if secret else "clean"), flush=True)
    c.close()
    if u:
        u.close()

while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

/** Skips the running test, its title saying why, when the listener cannot run here. */
export function needNobody(ctx: Mocha.Context): void {
  const why = nobodyUnavailable();
  if (why) {
    const test = ctx.currentTest ?? ctx.test; // in a beforeEach hook: the test it runs before
    if (test) {
      test.title += ` (skipped: ${why})`;
    }
    ctx.skip();
  }
}

/** Why the listener cannot run here, or undefined when it can. */
export function nobodyUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) {
    return "not root: runuser -u nobody needs root";
  }
  if (!fs.existsSync("/usr/bin/python3")) {
    return "no /usr/bin/python3";
  }
  if (!["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].some((p) => fs.existsSync(p))) {
    return "no runuser";
  }
  return undefined;
}

export interface ConnectionSeen {
  bytes: number;
  secret: boolean;
}

export class NobodyListener {
  port = 0;
  uid = -1;
  readonly connections: ConnectionSeen[] = [];
  private child: ChildProcess | undefined;

  /** Starts it (relaying to `upstream` when given); resolves once it listens. */
  async start(upstream = 0): Promise<void> {
    const child = spawn("runuser", ["-u", "nobody", "--", "/usr/bin/python3", "-c", SCRIPT, String(upstream)], { stdio: ["pipe", "pipe", "inherit"] });
    this.child = child;
    const lines = readline.createInterface({ input: child.stdout! });
    await new Promise<void>((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`the nobody listener exited (${code})`)));
      lines.on("line", (line) => {
        const started = /^port (\d+) uid (\d+)$/.exec(line);
        const conn = /^conn (\d+) (secret|clean)$/.exec(line);
        if (started) {
          this.port = Number(started[1]);
          this.uid = Number(started[2]);
          resolve();
        } else if (conn) {
          this.connections.push({ bytes: Number(conn[1]), secret: conn[2] === "secret" });
        }
      });
    });
  }

  /** Resolves once `n` connections have ended (each then is in `connections`). */
  async ended(n: number, timeoutMs = 5000): Promise<ConnectionSeen[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.connections.length < n) {
      if (Date.now() > deadline) {
        throw new Error(`the nobody listener saw ${this.connections.length} connections end, not ${n}`);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    return this.connections;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) {
      return;
    }
    const exited = new Promise((r) => child.once("exit", r));
    child.stdin?.end(); // it exits when its stdin closes
    await exited;
  }
}
