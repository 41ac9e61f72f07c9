// Post-mortem in the editor (issue #5), against the demo's real broker: a real
// actor crashes (tests/fixtures/crash_driver.py), the Crashes view lists it, and
// a click (raySleuth.inspectCrash) opens a session whose call stack shows the
// raise line, served from the stored record after the worker is gone.
import * as assert from "assert";
import { spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import { Commands, EXTENSION_ID } from "../../../extension/constants";
import { DapMessage, activateExtension, demoBroker, trackDapMessages, waitFor } from "./helpers";


describe("Crashes view against the demo's real broker", function () {
  let api: RaySleuthApi;
  let root: string;
  const messages = new Map<string, DapMessage[]>();
  const disposables: vscode.Disposable[] = [];

  before(async () => {
    api = await activateExtension();
    await waitFor("the connection", () => api.state.status === "connected", 30_000);
    const ext = vscode.extensions.getExtension(EXTENSION_ID);
    assert.ok(ext);
    root = ext.extensionPath;
    disposables.push(
      trackDapMessages(messages),
    );
  });

  after(() => {
    for (const d of disposables) {
      d.dispose();
    }
  });

  it("a crashed actor is listed; a click opens its record with the call stack at the raise line", async function () {
    this.timeout(180_000);
    const fixture = path.join(root, "tests", "fixtures", "crash_job.py");
    const raiseLine = fs.readFileSync(fixture, "utf8").split("\n").findIndex((l) => l.includes("@bp crash-raise")) + 1;
    assert.ok(raiseLine > 0);
    const child = spawn(path.join(root, ".venv", "bin", "python"), [path.join(root, "tests", "fixtures", "crash_driver.py")], {
      cwd: root,
      env: { ...process.env, RAY_ADDRESS: demoBroker().rayAddress, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER: "0", PYTHONUNBUFFERED: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (c: string) => (out += c));
    child.stderr?.setEncoding("utf8").on("data", (c: string) => (out += c));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    const m = /crashed (\d+) ZeroDivisionError/.exec(out);
    assert.ok(code === 0 && m, `crash_driver.py: ${out.slice(-3000)}`);
    const pid = Number(m[1]);

    const crash = await waitFor("the crash in the Crashes view", () => api.crashes.crashes.find((c) => c.worker?.pid === pid), 30_000);
    assert.strictEqual(crash.exc_type, "ZeroDivisionError");
    assert.strictEqual(crash.worker.rank, 7);
    assert.ok(crash.hint, "every record has a hint");
    const item = api.crashes.getTreeItem(crash);
    assert.match(String(item.label), /^rank 7 · Crasher · ZeroDivisionError$/);
    assert.strictEqual(item.command?.command, Commands.inspectCrash);

    const session = await vscode.commands.executeCommand<vscode.DebugSession | undefined>(Commands.inspectCrash, crash.id);
    assert.ok(session, "a session opened on the record");
    try {
      const stopped = await waitFor("the stopped event", () => (messages.get(session.id) ?? []).find((x) => x.event === "stopped"), 30_000);
      assert.strictEqual(stopped.body?.reason, "exception");
      const trace = (await session.customRequest("stackTrace", { threadId: stopped.body?.threadId })) as {
        stackFrames: { name: string; line: number; source?: { path?: string } }[];
      };
      const top = trace.stackFrames[0];
      assert.strictEqual(top.name, "_divide");
      assert.strictEqual(top.line, raiseLine);
      // In code-server a path comes back as a vscode-remote URI of the same file.
      assert.ok(top.source?.path?.endsWith(fixture), `the raise frame's source: ${String(top.source?.path)}`);
      const frame = await waitFor("VS Code's call stack focus on the raise frame", () => {
        const f = vscode.debug.activeStackItem;
        return f instanceof vscode.DebugStackFrame && f.session.id === session.id && f;
      }, 30_000);
      assert.ok(frame);
      const ev = (await session.customRequest("evaluate", { expression: "total", frameId: 1 })) as { result: string };
      assert.strictEqual(ev.result, "6");
    } finally {
      await vscode.debug.stopDebugging(session);
    }
  });
});
