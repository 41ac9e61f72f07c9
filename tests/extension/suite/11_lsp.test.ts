// The language client (issue 15) against the real `raysleuth lsp` and the demo's broker: a code
// lens on the demo's Trainer counts its live workers and reveals them in the Cluster view; the
// `breakpoint()` quick fix removes the line and sets the breakpoint in the editor and in the
// cluster set; an editor `[rank N]` breakpoint for a rank the job lacks is flagged; a setting
// change restarts the server, an interpreter without raysleuth is told once, and without a broker
// the static parts still work. Works on a copy of tests/fixtures/lsp/demo_names.py in a temp folder.
import * as assert from "assert";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import { BrokerClient } from "../../../extension/broker/brokerClient";
import { Commands } from "../../../extension/constants";
import { LSP_OWNER, SET_CLUSTER_BREAKPOINT } from "../../../extension/lsp/protocol";
import { connectedExtension, demoBroker, demoClient, extensionRoot, waitFor } from "./helpers";

const WORKERS = /^([1-9]\d*) workers?$/;

function settings(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration("raySleuth");
}

describe("Language server (issue 15)", function () {
  this.timeout(180_000);
  let api: RaySleuthApi;
  let truth: BrokerClient;
  let dir: string;
  let file: string;
  let uri: vscode.Uri;
  let doc: vscode.TextDocument;

  const lenses = async () => (await vscode.commands.executeCommand<vscode.CodeLens[]>("vscode.executeCodeLensProvider", uri)) ?? [];
  const workersLens = async () => (await lenses()).find((l) => WORKERS.test(l.command?.title ?? "") && l.command?.arguments?.[0]?.name === "Trainer");
  const ourDiagnostics = () => vscode.languages.getDiagnostics(uri).filter((d) => d.source === "raysleuth");
  const fileBreakpoints = () =>
    vscode.debug.breakpoints.filter((bp): bp is vscode.SourceBreakpoint => bp instanceof vscode.SourceBreakpoint && bp.location.uri.fsPath === file);
  const clusterPoints = async () => (await truth.getBreakpoints()).filter((b) => path.normalize(b.path) === file);
  const serverRunning = (what: string) =>
    waitFor(what, () => {
      if (api.languageServer.state === "failed") {
        throw new Error(`the language server failed: ${api.languageServer.told.join(" | ")}`);
      }
      return api.languageServer.state === "running";
    }, 60_000);

  before(async () => {
    api = await connectedExtension();
    truth = demoClient();
    const root = extensionRoot();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "raysleuth-lsp-"));
    file = path.join(dir, "demo_names.py");
    fs.copyFileSync(path.join(root, "tests", "fixtures", "lsp", "demo_names.py"), file);
    uri = vscode.Uri.file(file);
    await serverRunning("the language server to run");
    doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc);
  });

  after(async () => {
    vscode.debug.removeBreakpoints(fileBreakpoints());
    await api.mirror.idle();
    await truth.putBreakpoints({ path: file, owner: LSP_OWNER, breakpoints: [] }).catch(() => undefined);
    await waitFor("no cluster breakpoint of the copy left", async () => (await clusterPoints()).length === 0, 20_000).catch(() => undefined);
    await vscode.commands.executeCommand("workbench.action.files.revert").then(undefined, () => undefined);
    await vscode.commands.executeCommand("workbench.action.closeAllEditors");
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("shows the demo Trainer's live workers in a code lens, whose click reveals them in the Cluster view", async () => {
    const lens = await waitFor("a code lens '<N> workers' on Trainer", workersLens, 60_000);
    const cmd = lens.command;
    assert.ok(cmd);
    assert.strictEqual(cmd.command, Commands.revealWorkers);
    const ids = (cmd.arguments?.[0] as { workers: string[] }).workers;
    assert.strictEqual(ids.length, Number(WORKERS.exec(cmd.title)?.[1]), cmd.title);
    const trainers = new Set(api.state.workers.filter((w) => w.actor_class === "Trainer").map((w) => w.id));
    assert.ok(ids.every((id) => trainers.has(id)), `${ids.join(",")} are the Cluster view's Trainer workers`);

    const found = await vscode.commands.executeCommand<number>(cmd.command, ...(cmd.arguments ?? []));
    assert.strictEqual(found, ids.length);
    await waitFor("a Trainer worker selected in the Cluster view", () => {
      const sel = api.treeView.selection[0];
      return sel?.kind === "worker" && ids.includes(sel.worker.id);
    });
    assert.ok(api.treeView.visible, "the Cluster view is shown");
  });

  it("applies the breakpoint() quick fix: the line goes, the breakpoint is in the editor and in the cluster set", async () => {
    const bpLine = doc.getText().split("\n").findIndex((l) => l.includes("breakpoint()  # @bp leftover"));
    assert.ok(bpLine > 0);
    const diag = await waitFor("the leftover-breakpoint warning", () => ourDiagnostics().find((d) => d.range.start.line === bpLine), 30_000);
    const actions = (await vscode.commands.executeCommand<vscode.CodeAction[]>("vscode.executeCodeActionProvider", uri, diag.range, vscode.CodeActionKind.QuickFix.value)) ?? [];
    const fix = actions.find((a) => a.command?.command === SET_CLUSTER_BREAKPOINT);
    assert.ok(fix?.edit && fix.command, `a quick fix with an edit and a command among ${actions.map((a) => a.title).join(" | ")}`);
    const line = (fix.command.arguments?.[0] as { line: number }).line; // 1-based, in the text after the edit

    // As VS Code applies a code action: its edit, then its command.
    assert.ok(await vscode.workspace.applyEdit(fix.edit));
    await vscode.commands.executeCommand(fix.command.command, ...(fix.command.arguments ?? []));
    assert.ok(!doc.getText().includes("breakpoint()  # @bp leftover"), doc.getText());
    assert.strictEqual(doc.lineAt(line - 1).text.trim(), "return step");

    await waitFor("the editor breakpoint at the line", () => fileBreakpoints().some((bp) => bp.location.range.start.line === line - 1), 20_000);
    const points = await waitFor("the cluster breakpoint at the line", async () => {
      const here = (await clusterPoints()).filter((b) => b.line === line);
      // The window's own point took over the server's (owner "lsp"): the cluster set has it once.
      return here.length === 1 && here[0].owner === api.mirror.owner ? here : undefined;
    }, 30_000);
    assert.strictEqual(points[0].path, file);
    await waitFor("the warning gone", () => !ourDiagnostics().some((d) => d.code === "leftover-breakpoint"), 20_000);
  });

  it("flags an editor [rank N] breakpoint for a rank the demo's job does not have (raySleuth/editorBreakpoints)", async () => {
    const line = doc.getText().split("\n").findIndex((l) => l.includes("# @bp rank-scope"));
    const bp = new vscode.SourceBreakpoint(new vscode.Location(uri, new vscode.Position(line, 0)), true, "[rank 97] True");
    vscode.debug.addBreakpoints([bp]);
    try {
      // "this breakpoint": the server got it from the editor (the mirror's cluster copy names its owner).
      const d = await waitFor("the rank-not-in-job warning", () =>
        ourDiagnostics().find((x) => x.code === "rank-not-in-job" && x.range.start.line === line && /this breakpoint never stops/.test(x.message)), 30_000);
      assert.match(d.message, /\[rank 97\]/);
    } finally {
      vscode.debug.removeBreakpoints([bp]);
    }
    await waitFor("the warning gone with the breakpoint", () => !ourDiagnostics().some((x) => x.code === "rank-not-in-job"), 30_000);
  });

  it("restarts on a settings change, tells once that an interpreter cannot run it, and starts again when fixed", async () => {
    const ls = api.languageServer;
    const told: string[] = [];
    const notifier = ls.notifier;
    ls.notifier = (m) => {
      told.push(m);
      return Promise.resolve(undefined);
    };
    const good = settings().inspect<string>("pythonPath")?.globalValue;
    const bad = path.join(dir, "no-such-python");
    try {
      for (let round = 0; round < 2; round++) {
        await settings().update("pythonPath", bad, vscode.ConfigurationTarget.Global);
        await waitFor("the language server failed on the missing interpreter", () => ls.state === "failed", 30_000);
        await settings().update("pythonPath", good, vscode.ConfigurationTarget.Global);
        await serverRunning("the language server to run again");
      }
      assert.strictEqual(told.length, 1, told.join(" | "));
      assert.match(told[0], /was not found/);
      assert.ok(told[0].includes(bad));
      await waitFor("the Trainer lens after the restart", workersLens, 60_000);
    } finally {
      ls.notifier = notifier;
      await settings().update("pythonPath", good, vscode.ConfigurationTarget.Global);
    }
  });

  it("with raySleuth.pythonPath empty, runs on the broker's own interpreter and says so (issue 25)", async () => {
    const ls = api.languageServer;
    const good = settings().inspect<string>("pythonPath")?.globalValue;
    try {
      await settings().update("pythonPath", undefined, vscode.ConfigurationTarget.Global);
      await waitFor("the server restarted on the broker's interpreter", () => ls.state === "running" && ls.interpreter?.source.includes("broker") === true, 60_000);
      const info = JSON.parse(fs.readFileSync(path.join(demoBroker().stateDir, "broker.json"), "utf8")) as { python?: string };
      assert.strictEqual(ls.interpreter?.python, info.python);
      await waitFor("the Trainer lens from the server on the broker's interpreter", workersLens, 60_000);
    } finally {
      await settings().update("pythonPath", good, vscode.ConfigurationTarget.Global);
      await serverRunning("the language server on the test's interpreter again");
    }
  });

  it("without a broker: says so once, shows no live lens, and still flags the code", async () => {
    const ls = api.languageServer;
    const cfg = settings();
    const before = cfg.inspect<string>("brokerAddress")?.globalValue;
    const edit = new vscode.WorkspaceEdit();
    edit.insert(uri, new vscode.Position(doc.lineCount, 0), "\n\n@ray.remote\ndef leftover(x):\n    breakpoint()\n    return x\n");
    assert.ok(await vscode.workspace.applyEdit(edit));
    try {
      await cfg.update("brokerAddress", "http://127.0.0.1:9", vscode.ConfigurationTarget.Global);
      await waitFor("the server's 'no broker' status", () => ls.brokerStatus?.connected === false, 60_000);
      assert.match(ls.brokerStatus?.message ?? "", /No broker connected/);
      assert.strictEqual((await lenses()).length, 0, "no live lenses without a broker");
      const line = doc.getText().split("\n").findIndex((l) => l.trim() === "breakpoint()");
      await waitFor("the static warning without a broker", () => ourDiagnostics().some((d) => d.code === "leftover-breakpoint" && d.range.start.line === line), 30_000);
    } finally {
      await cfg.update("brokerAddress", before, vscode.ConfigurationTarget.Global);
    }
    await waitFor("the extension back on the demo's broker", () => api.state.status === "connected", 60_000);
    await waitFor("the server back on the demo's broker", () => ls.brokerStatus?.connected === true, 60_000);
    await waitFor("the Trainer lens again", workersLens, 60_000);
  });
});
