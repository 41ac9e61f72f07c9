// "Connect to Remote Broker…" (issue #13) in the real extension host: the demo's
// broker reached only through a TCP forwarder on another port (what ssh -L or
// kubectl port-forward does), with a token file; a debug session then rides the
// same forwarded port. Settings and the connection are put back afterwards.
import * as assert from "assert";
import * as fs from "fs";
import * as net from "net";
import * as os from "os";
import * as path from "path";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import { Commands, DEBUG_TYPE, SETTINGS_SECTION, Settings } from "../../../extension/constants";
import { activateExtension, demoBroker, waitFor } from "./helpers";

/** A forwarder to host:port on 127.0.0.1; `firstBytes` holds how each connection opened. */
async function forwarder(host: string, port: number): Promise<{ server: net.Server; port: number; firstBytes: string[] }> {
  const firstBytes: string[] = [];
  const server = net.createServer((down) => {
    const up = net.connect(port, host);
    down.once("data", (d: Buffer) => firstBytes.push(d.subarray(0, 15).toString("latin1")));
    down.pipe(up).on("error", () => down.destroy());
    up.pipe(down).on("error", () => up.destroy());
    down.on("error", () => up.destroy());
    up.on("error", () => down.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as net.AddressInfo).port, firstBytes };
}

describe("Connect to Remote Broker (one forwarded port)", function () {
  this.timeout(120_000);
  let api: RaySleuthApi;
  let fwd: Awaited<ReturnType<typeof forwarder>> | undefined;
  const tokenFile = path.join(os.tmpdir(), `raysleuth-remote-token-${process.pid}`);

  before(async () => {
    api = await activateExtension();
  });

  after(async () => {
    await vscode.debug.stopDebugging();
    const settings = vscode.workspace.getConfiguration(SETTINGS_SECTION);
    await settings.update(Settings.brokerAddress, undefined, vscode.ConfigurationTarget.Global);
    await settings.update(Settings.tokenFile, undefined, vscode.ConfigurationTarget.Global);
    await api.connection.connect({ interactive: false }); // back to the demo's broker.json
    fwd?.server.close();
    fs.rmSync(tokenFile, { force: true });
  });

  it("connects through the forwarder with the token file, and a rank session rides the same port", async () => {
    const demo = demoBroker();
    const target = new URL(demo.url);
    fwd = await forwarder(target.hostname, Number(target.port));
    fs.writeFileSync(tokenFile, demo.token + "\n", { mode: 0o600 });

    const ok = await vscode.commands.executeCommand<boolean>(Commands.connectRemote, { address: `127.0.0.1:${fwd.port}`, tokenFile });
    assert.strictEqual(ok, true);
    assert.strictEqual(api.connection.client?.url, `http://127.0.0.1:${fwd.port}`);
    assert.strictEqual(vscode.workspace.getConfiguration(SETTINGS_SECTION).get(Settings.brokerAddress), `http://127.0.0.1:${fwd.port}`);
    await waitFor("the demo's rank 0 listed through the forwarder", () => api.state.workers.some((w) => w.rank === 0 && w.state !== "exited"));

    const started = new Promise<vscode.DebugSession>((resolve) => {
      const sub = vscode.debug.onDidStartDebugSession((s) => {
        if (s.type === DEBUG_TYPE && s.configuration.rank === 0) {
          sub.dispose();
          resolve(s);
        }
      });
    });
    assert.ok(await vscode.debug.startDebugging(undefined, { type: DEBUG_TYPE, request: "attach", name: "remote rank 0", rank: 0 }));
    const session = await started;
    await waitFor("a DAP connection through the forwarder", () => fwd?.firstBytes.some((b) => b.startsWith("Content-Length")));
    const threads = (await session.customRequest("threads")) as { threads: unknown[] };
    assert.ok(threads.threads.length > 0, "the worker's threads, through the forwarded port");
    await vscode.debug.stopDebugging(session);
  });

  it("marks the Stacks view and an open snapshot table stale once the connection is to another broker (issue 25)", async () => {
    await api.connection.connect({ interactive: false }); // the demo's broker, straight
    const direct = api.connection.instance;
    assert.ok(direct, "the connection names its broker");
    assert.ok(await api.stacks.refresh(), "stacks taken from the demo's broker");
    assert.strictEqual(api.stacks.stale, undefined);
    const demoPy = path.join(path.resolve(__dirname, "../../.."), "python_backend", "raysleuth", "cli", "demo.py");
    const line = fs.readFileSync(demoPy, "utf8").split("\n").findIndex((l) => l.includes('raysleuth.event("step"')) + 1;
    const view = await api.snapshots.capture({ path: demoPy, line, ranks: [0], count: 1 });
    assert.ok(view, "a snapshot table open");
    try {
      const demo = demoBroker();
      const target = new URL(demo.url);
      const other = await forwarder(target.hostname, Number(target.port));
      try {
        fs.writeFileSync(tokenFile, demo.token + "\n", { mode: 0o600 });
        assert.ok(await vscode.commands.executeCommand<boolean>(Commands.connectRemote, { address: `127.0.0.1:${other.port}`, tokenFile }));
        assert.notStrictEqual(api.connection.instance, direct, "another broker address is another broker to the views");
        await waitFor("the Stacks view marked stale", () => api.stacks.stale !== undefined && api.stacks.treeView.message?.startsWith("⚠ stale"));
        await waitFor("the snapshot table marked stale", () => view.stale !== undefined && view.html?.includes("no longer update"));
        assert.ok(await api.stacks.refresh(), "Refresh reads the stacks from the broker now");
        assert.strictEqual(api.stacks.stale, undefined);
      } finally {
        other.server.close();
      }
    } finally {
      view.close();
      const settings = vscode.workspace.getConfiguration(SETTINGS_SECTION);
      await settings.update(Settings.brokerAddress, undefined, vscode.ConfigurationTarget.Global);
      await settings.update(Settings.tokenFile, undefined, vscode.ConfigurationTarget.Global);
      await api.connection.connect({ interactive: false });
    }
  });

  it("refuses a token file that does not exist, saying which", async () => {
    const seen: string[] = [];
    const original = api.remote.showError;
    api.remote.showError = (m) => seen.push(m);
    try {
      const ok = await vscode.commands.executeCommand<boolean>(Commands.connectRemote, { address: "127.0.0.1:1", tokenFile: "/nonexistent/token" });
      assert.strictEqual(ok, false);
    } finally {
      api.remote.showError = original;
    }
    assert.ok(seen.some((m) => m.includes("/nonexistent/token")), seen.join(" | "));
  });
});
