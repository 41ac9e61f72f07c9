// The "Ray cluster" parent session's adapter, fed DAP requests in-process as VS
// Code's inline adapter host does (plain mocha, no editor window).
import * as assert from "assert";
import type { DebugProtocol } from "@vscode/debugprotocol";
import { ClusterSessionAdapter, GROUP_THREAD_ID } from "../../../extension/debug/clusterSessionAdapter";

describe("Ray cluster session adapter", () => {
  let adapter: ClusterSessionAdapter;
  let sent: DebugProtocol.ProtocolMessage[];
  let seq: number;

  beforeEach(() => {
    adapter = new ClusterSessionAdapter();
    sent = [];
    seq = 1;
    adapter.onDidSendMessage((m) => sent.push(m as DebugProtocol.ProtocolMessage));
  });

  afterEach(() => adapter.dispose());

  /** What VS Code sends (it always asks for native paths). */
  const INITIALIZE = { clientID: "vscode", adapterID: "raysleuth", pathFormat: "path", linesStartAt1: true, columnsStartAt1: true };

  function request(command: string, args?: unknown): DebugProtocol.Response {
    const req: DebugProtocol.Request = { seq: seq++, type: "request", command, arguments: args };
    adapter.handleMessage(req);
    const response = sent.find((m): m is DebugProtocol.Response => m.type === "response" && (m as DebugProtocol.Response).request_seq === req.seq);
    assert.ok(response, `a response to ${command}: ${JSON.stringify(sent)}`);
    return response;
  }

  it("answers initialize with configurationDone and terminate support, and sends no initialized event", () => {
    const r = request("initialize", INITIALIZE);
    assert.strictEqual(r.success, true);
    assert.deepStrictEqual(r.body, { supportsConfigurationDoneRequest: true, supportsTerminateRequest: true });
    assert.ok(!sent.some((m) => m.type === "event"), JSON.stringify(sent));
  });

  it("accepts attach, configurationDone and disconnect, and lists no threads", () => {
    request("initialize", INITIALIZE);
    assert.strictEqual(request("attach", { cluster: true }).success, true);
    assert.strictEqual(request("configurationDone").success, true);
    assert.deepStrictEqual(request("threads").body, { threads: [] });
    assert.strictEqual(request("disconnect", {}).success, true);
  });

  it("ends with a terminated event on terminate", () => {
    const r = request("terminate", {});
    assert.strictEqual(r.success, true);
    assert.ok(sent.some((m) => m.type === "event" && (m as DebugProtocol.Event).event === "terminated"), JSON.stringify(sent));
  });

  it("refuses what only a worker session can do, saying so", () => {
    for (const command of ["evaluate", "stackTrace", "continue", "pause", "next"]) {
      const r = request(command, {});
      assert.strictEqual(r.success, false, command);
      assert.strictEqual(r.message, `The Ray cluster session only groups worker sessions: '${command}' needs a worker session.`);
    }
  });

  it("is paused while every worker session under it is, running otherwise (issue #13, item 5)", () => {
    request("initialize", INITIALIZE);
    const events = () => sent.filter((m): m is DebugProtocol.Event => m.type === "event").map((e) => [e.event, (e.body as { description?: string }).description]);
    adapter.setChildren(3, 2);
    assert.deepStrictEqual(events(), [], "one of three runs: no stop");
    assert.deepStrictEqual(request("threads").body, { threads: [] }, "running: no thread, as before");
    adapter.setChildren(3, 3);
    assert.deepStrictEqual(events(), [["stopped", "all 3 worker sessions paused"]]);
    assert.deepStrictEqual(request("threads").body, { threads: [{ id: GROUP_THREAD_ID, name: "3 worker sessions, 3 paused" }] });
    adapter.setChildren(3, 3);
    assert.strictEqual(events().length, 1, "told once");
    adapter.setChildren(3, 1);
    assert.deepStrictEqual(events().at(-1), ["continued", undefined]);
  });

  it("continues, steps and pauses every worker session through its group actions", async () => {
    const calls: string[] = [];
    adapter.dispose();
    adapter = new ClusterSessionAdapter({
      continueAll: () => (calls.push("continue"), Promise.resolve()),
      pauseAll: () => (calls.push("pause"), Promise.resolve()),
      stepAll: (step) => (calls.push(step), step === "stepOut" ? Promise.reject(new Error("rank 2 is not paused")) : Promise.resolve()),
    });
    adapter.onDidSendMessage((m) => sent.push(m as DebugProtocol.ProtocolMessage));
    const send = (command: string) => adapter.handleMessage({ seq: seq++, type: "request", command, arguments: { threadId: GROUP_THREAD_ID } } as DebugProtocol.Request);
    for (const command of ["continue", "pause", "next", "stepIn", "stepOut"]) {
      send(command);
    }
    await new Promise((r) => setImmediate(r));
    assert.deepStrictEqual(calls, ["continue", "pause", "next", "stepIn", "stepOut"]);
    const responses = sent.filter((m): m is DebugProtocol.Response => m.type === "response");
    assert.deepStrictEqual(
      responses.map((r) => [r.command, r.success]),
      [["continue", true], ["pause", true], ["next", true], ["stepIn", true], ["stepOut", false]],
    );
    assert.match(responses.at(-1)?.message ?? "", /rank 2 is not paused/);
    assert.deepStrictEqual(request("stackTrace", { threadId: GROUP_THREAD_ID }).body, { stackFrames: [], totalFrames: 0 });
  });
});
