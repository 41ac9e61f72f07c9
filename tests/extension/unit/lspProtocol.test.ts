// The language client's pure parts (extension/lsp/protocol.ts, interpreterProbe.ts): the names it
// shares with `raysleuth lsp`, read from the server's sources; the shapes it sends and reads; the
// texts it shows; the interpreter check. Plain mocha, no window.
import * as assert from "assert";
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { Commands } from "../../../extension/constants";
import { firstRunnable, probeInterpreter } from "../../../extension/lsp/interpreterProbe";
import {
  BREAKPOINT_ADDED,
  BROKER_STATUS,
  EDITOR_BREAKPOINTS,
  LSP_OWNER,
  SET_CLUSTER_BREAKPOINT,
  brokerStatusText,
  editorBreakpoints,
  initializationOptions,
  parseBreakpointAdded,
  parseBrokerStatus,
  parseProbeOutput,
  parseRevealArgs,
  probeProblem,
  ProbeResult,
  serverLogLine,
} from "../../../extension/lsp/protocol";

const ROOT = path.resolve(__dirname, "../../..");
const LSP_SRC = path.join(ROOT, "python_backend", "raysleuth", "lsp");

/** The string a module-level `NAME = "..."` of a server module holds. */
function serverConstant(file: string, name: string): string | undefined {
  const text = fs.readFileSync(path.join(LSP_SRC, file), "utf8");
  return new RegExp(`^${name}\\s*=\\s*"([^"]*)"`, "m").exec(text)?.[1];
}

/** A Python that runs, or undefined (the probe's own tests then skip). */
function python(candidates: string[]): string | undefined {
  for (const p of candidates) {
    try {
      execFileSync(p, ["-c", "pass"], { stdio: "ignore", timeout: 10_000 });
      return p;
    } catch {
      // try the next one
    }
  }
  return undefined;
}

describe("Language server protocol", () => {
  it("names the server's commands and notifications as server.py, render.py and live.py do", () => {
    assert.strictEqual(serverConstant("server.py", "SET_BREAKPOINT"), SET_CLUSTER_BREAKPOINT);
    assert.strictEqual(serverConstant("server.py", "STATUS"), BROKER_STATUS);
    assert.strictEqual(serverConstant("server.py", "BREAKPOINT_ADDED"), BREAKPOINT_ADDED);
    assert.strictEqual(serverConstant("server.py", "EDITOR_BREAKPOINTS"), EDITOR_BREAKPOINTS);
    assert.strictEqual(serverConstant("live.py", "OWNER"), LSP_OWNER);
    // The lenses run the extension's commands by these ids.
    assert.strictEqual(serverConstant("render.py", "REVEAL"), Commands.revealWorkers);
    assert.strictEqual(serverConstant("render.py", "ATTACH"), Commands.attachWorker);
    assert.strictEqual(serverConstant("render.py", "INSPECT_CRASH"), Commands.inspectCrash);
  });

  it("passes the broker settings trimmed, empty meaning discover", () => {
    const settings: Record<string, string> = { brokerAddress: " http://127.0.0.1:7311 ", tokenFile: "", stateDir: "~/.raysleuth" };
    assert.deepStrictEqual(initializationOptions((k) => settings[k]), { brokerAddress: "http://127.0.0.1:7311", tokenFile: "", stateDir: "~/.raysleuth" });
  });

  it("sends a document's enabled breakpoints 1-based, sorted, each line and condition once", () => {
    const params = editorBreakpoints("file:///w/train.py", [
      { line: 9, condition: "[rank 7]", enabled: true },
      { line: 2, enabled: true },
      { line: 9, condition: "[rank 7]", enabled: true },
      { line: 4, condition: "x > 1", enabled: false },
      { line: 9, condition: "[rank 0]", enabled: true },
    ]);
    assert.deepStrictEqual(params, {
      uri: "file:///w/train.py",
      breakpoints: [
        { line: 3, condition: "" },
        { line: 10, condition: "[rank 0]" },
        { line: 10, condition: "[rank 7]" },
      ],
    });
    assert.deepStrictEqual(editorBreakpoints("u", []).breakpoints, []);
  });

  it("reads a lens's reveal argument and refuses anything else", () => {
    assert.deepStrictEqual(parseRevealArgs({ name: "Trainer", kind: "actor", workers: ["a1", 3, "", "b2"] }), { name: "Trainer", kind: "actor", workers: ["a1", "b2"] });
    assert.strictEqual(parseRevealArgs(undefined), undefined);
    assert.strictEqual(parseRevealArgs("a1"), undefined);
    assert.strictEqual(parseRevealArgs({ name: "Trainer" }), undefined);
  });

  it("reads the server's notifications and refuses malformed ones", () => {
    assert.deepStrictEqual(parseBrokerStatus({ connected: false, url: null, message: "No broker connected: ..." }), { connected: false, url: null, message: "No broker connected: ..." });
    assert.strictEqual(parseBrokerStatus({ url: "http://x" }), undefined);
    const added = { uri: "file:///w/a.py", path: "/w/a.py", line: 7, cluster: true, message: "cluster breakpoint set at a.py:7" };
    assert.deepStrictEqual(parseBreakpointAdded(added), added);
    assert.strictEqual(parseBreakpointAdded({ ...added, cluster: "yes" })?.cluster, false);
    for (const bad of [{ ...added, line: 0 }, { ...added, line: 1.5 }, { ...added, uri: 3 }, null]) {
      assert.strictEqual(parseBreakpointAdded(bad), undefined, JSON.stringify(bad));
    }
  });

  it("says in the status bar that no broker is connected, and where the connected one is", () => {
    assert.match(brokerStatusText({ connected: false, url: null, message: "" }), /no broker connected/);
    assert.match(brokerStatusText({ connected: true, url: "http://127.0.0.1:7311", message: "" }), /http:\/\/127\.0\.0\.1:7311/);
  });
});

describe("Language server log lines", () => {
  it("reads the server's Python log lines at their levels, a traceback's lines at the level before", () => {
    assert.deepStrictEqual(serverLogLine("2026-12-03 20:01:54,822 INFO raysleuth.lsp.live: Connected to the broker.", "error"), {
      level: "info",
      text: "[lsp] raysleuth.lsp.live: Connected to the broker.",
    });
    assert.strictEqual(serverLogLine("2026-12-03 20:01:54,822 WARNING x: y", "info").level, "warn");
    assert.strictEqual(serverLogLine("2026-12-03 20:01:54,822 CRITICAL x: y", "info").level, "error");
    assert.deepStrictEqual(serverLogLine('  File "server.py", line 3, in f', "error"), { level: "error", text: '[lsp]   File "server.py", line 3, in f' });
    assert.strictEqual(serverLogLine("[Info  - 8:01:54 PM] Connection to server got closed.", "info").level, "info");
  });
});

describe("Language server interpreter check", () => {
  it("reads the probe's line: ok, or what is missing", () => {
    assert.deepStrictEqual(parseProbeOutput("py", 'noise\n{"version": "3.12.4", "missing": []}\n'), { kind: "ok", python: "py", version: "3.12.4" });
    assert.deepStrictEqual(parseProbeOutput("py", '{"version": "3.12.4", "missing": ["pygls", "lsprotocol"]}'), {
      kind: "missing",
      python: "py",
      version: "3.12.4",
      modules: ["pygls", "lsprotocol"],
    });
    assert.strictEqual(parseProbeOutput("py", "Python 2.7").kind, "failed");
  });

  it("says what to do for each problem, and nothing when the interpreter is fine", () => {
    const src = "setting raySleuth.pythonPath";
    assert.strictEqual(probeProblem({ kind: "ok", python: "py", version: "3.12.4" }, src), undefined);
    const noPkg = probeProblem({ kind: "missing", python: "/v/bin/python", version: "3.12.4", modules: ["raysleuth", "pygls", "lsprotocol"] }, src) ?? "";
    assert.match(noPkg, /raysleuth is not installed/);
    assert.match(noPkg, /"\/v\/bin\/python -m pip install 'raysleuth\[lsp\]'"/);
    assert.match(noPkg, /raySleuth\.pythonPath/);
    assert.match(noPkg, /raySleuth\.languageServer\.enabled/);
    const noExtra = probeProblem({ kind: "missing", python: "py", version: "3.12.4", modules: ["pygls"] }, src) ?? "";
    assert.match(noExtra, /pygls is missing/);
    assert.match(probeProblem({ kind: "missing", python: "py", version: "3.9.1", modules: ["raysleuth"] }, src) ?? "", /needs Python 3\.11 or newer; this one is 3\.9\.1/);
    assert.match(probeProblem({ kind: "notFound", python: "/nope/python", detail: "ENOENT" }, src) ?? "", /"\/nope\/python" \(setting raySleuth\.pythonPath\) was not found/);
    assert.match(probeProblem({ kind: "failed", python: "py", detail: "boom" }, src) ?? "", /failed \(boom\)/);
  });

  it("finds an interpreter that does not exist not found", async () => {
    const r = await probeInterpreter(path.join(ROOT, "no-such-dir", "python"));
    assert.strictEqual(r.kind, "notFound");
  });

  it("runs the probe in a real Python and gets its version", async function () {
    const py = python([path.join(ROOT, ".venv", "bin", "python"), "python3"]);
    if (!py) {
      this.skip();
    }
    const r = await probeInterpreter(py);
    assert.ok(r.kind === "ok" || r.kind === "missing", JSON.stringify(r));
    assert.match(r.version, /^3\.\d+\.\d+$/);
  });

  it("finds the project's .venv ready to run raysleuth lsp", async function () {
    const py = path.join(ROOT, ".venv", "bin", "python");
    if (!fs.existsSync(py)) {
      this.skip();
    }
    const r = await probeInterpreter(py);
    assert.strictEqual(r.kind, "ok", JSON.stringify(r));
  });

  it("takes the first interpreter that can run the server, and says why each one before it cannot (issue 25)", async () => {
    const candidates = [
      { python: "/gone/python", source: "the broker's interpreter, from broker.json" },
      { python: "/usr/bin/python3", source: "python3 on PATH" },
      { python: "/venv/bin/python", source: "the Python extension's active interpreter" },
    ];
    const probe = (python: string): Promise<ProbeResult> =>
      Promise.resolve(
        python === "/gone/python"
          ? { kind: "notFound", python, detail: "ENOENT" }
          : python === "/usr/bin/python3"
            ? { kind: "missing", python, version: "3.11.2", modules: ["raysleuth"] }
            : { kind: "ok", python, version: "3.11.2" },
      );
    const { chosen, problems } = await firstRunnable(candidates, probe);
    assert.strictEqual(chosen?.python, "/venv/bin/python");
    assert.strictEqual(problems.length, 2);
    assert.match(problems[0], /broker's interpreter.*was not found/);
    assert.match(problems[1], /raysleuth is not installed/);
    const none = await firstRunnable(candidates.slice(0, 2), probe);
    assert.strictEqual(none.chosen, undefined);
    assert.strictEqual(none.problems.length, 2);
  });
});
