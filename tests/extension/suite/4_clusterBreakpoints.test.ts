// Editor breakpoints mirrored into the cluster set (issue #4), against the demo's
// real broker: a burst of changes ends as the editor's set, a point the terminal
// set survives the editor's changes, Set Breakpoint Ranks writes the [rank …]
// prefix, and conditions that are not Python are refused once. Every test removes
// its breakpoints. The runs of tests/fixtures/bp_job.py are in 4_clusterBreakpointsRun.
import * as assert from "assert";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import { BrokerClient } from "../../../extension/broker/brokerClient";
import { ClusterBreakpoint } from "../../../extension/broker/types";
import type { MirrorNotifier } from "../../../extension/breakpoints/breakpointMirror";
import { breakpointAt } from "../../../extension/breakpoints/rankBreakpoints";
import { connectedExtension, demoClient, sourceBreakpoint, waitFor } from "./helpers";


describe("Cluster breakpoints against the demo's real broker", () => {
  let api: RaySleuthApi;
  let truth: BrokerClient;
  let workspaceDir: string;

  const clusterSet = async (file: string): Promise<ClusterBreakpoint[]> => (await truth.getBreakpoints()).filter((b) => b.path === file);

  before(async () => {
    api = await connectedExtension();
    truth = demoClient();
    const folder = vscode.workspace.workspaceFolders?.[0];
    assert.ok(folder, "the test window has a workspace folder");
    workspaceDir = folder.uri.fsPath;
  });

  after(() => {
    truth?.dispose();
  });

  it("a burst of editor changes ends as the editor's set in the cluster (debounced, in order per file)", async function () {
    this.timeout(60_000);
    const file = path.join(workspaceDir, "scratch_burst.py");
    fs.writeFileSync(file, Array.from({ length: 10 }, (_, i) => `v${i} = ${i}\n`).join(""));
    const bps = Array.from({ length: 6 }, (_, i) => sourceBreakpoint(file, i, i % 2 ? `v0 == ${i}` : undefined));
    try {
      for (const bp of bps) {
        vscode.debug.addBreakpoints([bp]); // one change event each, as clicks in the gutter give
      }
      vscode.debug.removeBreakpoints([bps[1], bps[4]]);
      const disabled = new vscode.SourceBreakpoint(bps[5].location, false, bps[5].condition);
      vscode.debug.removeBreakpoints([bps[5]]);
      vscode.debug.addBreakpoints([disabled]); // disabled breakpoints are not mirrored
      bps.push(disabled);
      await api.mirror.idle();
      const lines = await waitFor("the cluster set to be lines 1, 3, 4", async () => {
        const set = await clusterSet(file);
        const got = set.map((b) => `${b.line}:${b.condition ?? ""}`).sort();
        return JSON.stringify(got) === JSON.stringify(["1:", "3:", "4:v0 == 3"]) && got;
      }, 15_000);
      assert.ok(lines);
    } finally {
      vscode.debug.removeBreakpoints(bps);
      await api.mirror.idle();
      fs.rmSync(file, { force: true });
    }
    await waitFor("the cluster set to forget the file", async () => (await clusterSet(file)).length === 0, 15_000);
  });

  it("a point the terminal set (owner cli) survives adding and removing an editor breakpoint in the same file, and its line says who set it", async function () {
    this.timeout(60_000);
    const file = path.join(workspaceDir, "scratch_owner.py");
    fs.writeFileSync(file, "a = 1\nb = 2\nc = 3\nd = 4\n");
    // What `raysleuth break scratch_owner.py:3 --if ... --ranks 0` sends.
    const putCli = (breakpoints: { line: number; condition?: string }[]) => truth.putBreakpoints({ path: file, owner: "cli", breakpoints });
    const cliLine = (): Promise<ClusterBreakpoint | undefined> => clusterSet(file).then((set) => set.find((b) => b.line === 3 && b.owner === "cli"));
    const editorBp = sourceBreakpoint(file, 0, "[rank 1]");
    try {
      await vscode.window.showTextDocument(vscode.Uri.file(file));
      await putCli([{ line: 3, condition: "[rank 0] c > 0" }]);
      const shown = /^ {2}⟵ set from the terminal: \[rank 0\] c > 0 · armed on (\d+|ranks? [\d,-]+( \+ \d+ unranked)?|\d+ unranked|none)$/;
      await waitFor("the terminal's point annotated at line 3", () => api.decorations.annotations(file).find((a) => a.line === 3 && shown.test(a.text)), 15_000);

      vscode.debug.addBreakpoints([editorBp]);
      await api.mirror.idle();
      const both = await waitFor("the editor's point and the terminal's in the cluster set", async () => {
        const set = await clusterSet(file);
        return set.length === 2 && set;
      }, 15_000);
      assert.deepStrictEqual(
        both.map((b) => `${b.line}:${b.owner}`).sort(),
        [`1:${api.mirror.owner}`, "3:cli"],
        "each point keeps its owner",
      );
      assert.match(api.mirror.owner, /^vscode:\S+$/);
      await waitFor("the editor's own point annotated as before", () => api.decorations.annotations(file).find((a) => a.line === 1 && /^ {2}⟵ rank 1 · armed on (\d+|ranks? [\d,-]+( \+ \d+ unranked)?|\d+ unranked|none)$/.test(a.text)), 10_000);
      assert.ok(await cliLine(), "adding an editor breakpoint kept the terminal's point");

      vscode.debug.removeBreakpoints([editorBp]);
      await api.mirror.idle();
      await waitFor("the editor's point to go", async () => !(await clusterSet(file)).some((b) => b.line === 1), 15_000);
      const kept = await cliLine();
      assert.ok(kept, "removing the editor's breakpoint kept the terminal's point");
      assert.strictEqual(kept.condition, "[rank 0] c > 0");
      await waitFor("line 3 still says it was set from the terminal", () => api.decorations.annotations(file).find((a) => a.line === 3 && shown.test(a.text)), 10_000);
      assert.ok(!api.decorations.annotations(file).some((a) => a.line === 1), "no annotation is left at the editor's old line");
      assert.ok(!vscode.debug.breakpoints.some((b) => b instanceof vscode.SourceBreakpoint && b.location.uri.fsPath === file), "the terminal's point never became an editor breakpoint");
    } finally {
      vscode.debug.removeBreakpoints([editorBp]);
      await api.mirror.idle();
      await putCli([]);
      await vscode.commands.executeCommand("workbench.action.closeAllEditors");
      fs.rmSync(file, { force: true });
    }
    await waitFor("the cluster set to forget the file", async () => (await clusterSet(file)).length === 0, 15_000);
    await waitFor("the annotations to go", () => api.decorations.annotations(file).length === 0, 10_000);
  });

  it("Set Breakpoint Ranks writes, replaces and removes the [rank …] prefix of the cursor line's breakpoint; the mirror follows", async function () {
    this.timeout(60_000);
    const file = path.join(workspaceDir, "scratch_ranks.py");
    fs.writeFileSync(file, "def f(x):\n    y = x + 1\n    return y\n");
    const uri = vscode.Uri.file(file);
    try {
      await vscode.window.showTextDocument(uri);
      const first = api.rankBreakpoints.setRanksAt(uri, 1, [2, 0]);
      assert.strictEqual(first.condition, "[rank 0,2]", "a new breakpoint with the scope");
      const withRest = sourceBreakpoint(file, 1, "[rank 0,2] x > 1");
      vscode.debug.removeBreakpoints([first]);
      vscode.debug.addBreakpoints([withRest]);
      const replaced = api.rankBreakpoints.setRanksAt(uri, 1, [3]);
      assert.strictEqual(replaced.condition, "[rank 3] x > 1", "the scope replaced, the Python kept");
      assert.strictEqual(breakpointAt(uri, 1), replaced, "one breakpoint on the line, the new one");
      assert.ok(!vscode.debug.breakpoints.includes(withRest), "the old breakpoint is gone (breakpoints are immutable)");

      const mirrored = await waitFor("the cluster set to hold [rank 3] x > 1 at line 2", async () => (await clusterSet(file)).find((b) => b.line === 2 && b.condition === "[rank 3] x > 1"), 15_000);
      assert.strictEqual(mirrored.scope, "rank 3");
      await waitFor("the line's annotation", () => api.decorations.annotations(file).find((a) => a.line === 2 && /^ {2}⟵ rank 3 · armed on (\d+|ranks? [\d,-]+( \+ \d+ unranked)?|\d+ unranked|none)$/.test(a.text)), 10_000);

      const plain = api.rankBreakpoints.setRanksAt(uri, 1, []);
      assert.strictEqual(plain.condition, "x > 1", "no ranks picked: no scope");
      // No rank scope: the plain default (raySleuth.plainBreakpoints "firstRank") stops rank 0 of each job.
      await waitFor("the cluster set to drop the rank scope", async () => (await clusterSet(file)).find((b) => b.line === 2 && b.condition === "x > 1" && b.scope === "first rank"), 15_000);
      vscode.debug.removeBreakpoints([plain]);
      await waitFor("the cluster set to forget the file", async () => (await clusterSet(file)).length === 0, 15_000);
      await waitFor("the annotation to go", () => api.decorations.annotations(file).length === 0, 10_000);
    } finally {
      vscode.debug.removeBreakpoints(vscode.debug.breakpoints.filter((b) => b instanceof vscode.SourceBreakpoint && b.location.uri.fsPath === file));
      await vscode.commands.executeCommand("workbench.action.closeAllEditors");
      await api.mirror.idle();
      fs.rmSync(file, { force: true });
    }
  });

  it("conditions that are not Python are refused once, in one warning with the broker's hint, not once per breakpoint", async function () {
    this.timeout(60_000);
    const file = path.join(workspaceDir, "scratch_bad.py");
    fs.writeFileSync(file, "a = 1\nb = 2\nc = 3\n");
    const shown: string[] = [];
    const original = api.mirror.notifier;
    const recording: MirrorNotifier = {
      warn: (m) => {
        shown.push(m);
        return Promise.resolve(undefined);
      },
    };
    api.mirror.notifier = recording;
    const bad = [sourceBreakpoint(file, 0, "[rank 1] step ==="), sourceBreakpoint(file, 1, "[rank 1] ) (")];
    try {
      vscode.debug.addBreakpoints(bad);
      await waitFor("a warning", () => shown.length > 0, 15_000);
      await api.mirror.idle();
      assert.strictEqual(shown.length, 1, JSON.stringify(shown));
      assert.match(shown[0], /^Ray Sleuth: the cluster did not take the breakpoints of scratch_bad\.py: \S/);
      // Sending the same set again fails the same way: nothing new is shown.
      api.mirror.syncAll();
      await api.mirror.idle();
      assert.strictEqual(shown.length, 1, `the same failure is not shown twice: ${JSON.stringify(shown)}`);
      assert.deepStrictEqual(await clusterSet(file), [], "nothing of the file was taken");
    } finally {
      vscode.debug.removeBreakpoints(bad);
      await api.mirror.idle();
      api.mirror.notifier = original;
      fs.rmSync(file, { force: true });
    }
  });
});
