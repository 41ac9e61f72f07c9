// The "Ray cluster" parent session's adapter, fed DAP requests in-process as VS
// Code's inline adapter host does (plain mocha, no editor window).
import * as assert from "assert";
import type { DebugProtocol } from "@vscode/debugprotocol";
import { ClusterSessionAdapter } from "../../../extension/debug/clusterSessionAdapter";

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
    for (const command of ["evaluate", "stackTrace", "continue", "pause"]) {
      const r = request(command, {});
      assert.strictEqual(r.success, false, command);
      assert.strictEqual(r.message, `The Ray cluster session only groups worker sessions: '${command}' needs a worker session.`);
    }
  });
});
