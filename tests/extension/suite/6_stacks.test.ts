// The hang radar in the editor (issue #12), against the demo's real broker: a
// real job (tests/fixtures/stacks_driver.py) whose ranks 0-2 wait at one line
// and rank 3 lags at another; the Stacks view shows the two groups, rank 3
// marked, and its frame's command (what a click runs) opens the fixture at
// that line. The broker's hang watch, switched on from the view, raises a
// notification whose "Show Stacks" shows them again.
import * as assert from "assert";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import { Commands } from "../../../extension/constants";
import { StacksResult } from "../../../extension/broker/types";
import type { StackGroupNode, StackNode } from "../../../extension/views/stackTree";
import type { SnapshotView } from "../../../extension/views/snapshotPanel";
import { Fixture, connectedExtension, extensionRoot, startFixture, waitFor } from "./helpers";

function groupsIn(nodes: readonly StackNode[]): StackGroupNode[] {
  return nodes.flatMap((n) => (n.kind === "group" ? [n] : n.kind === "job" ? groupsIn(n.children) : []));
}

function markerLine(file: string, marker: string): number {
  const line = fs.readFileSync(file, "utf8").split("\n").findIndex((l) => l.includes(`@bp ${marker}`)) + 1;
  assert.ok(line > 0, `${marker} in ${file}`);
  return line;
}

describe("Stacks view against the demo's real broker", function () {
  let api: RaySleuthApi;
  let fixture: string;
  let driver: Fixture | undefined;
  let jobId: string;
  let pids: number[];

  before(async function () {
    this.timeout(120_000);
    api = await connectedExtension();
    const root = extensionRoot();
    fixture = path.join(root, "tests", "fixtures", "stacks_job.py");
    driver = startFixture("stacks_driver.py", ["--seconds", "300"]);
    const m = await driver.match("the driver's job", /^job (\S+) pids ([\d ]+)$/m, 90_000);
    jobId = m[1];
    pids = m[2].trim().split(/\s+/).map(Number);
    assert.strictEqual(pids.length, 4);
  });

  after(async function () {
    this.timeout(60_000);
    if (api?.stacks.watching) {
      await api.stacks.toggleWatch();
    }
    await driver?.stop(); // the driver ends, and its actors with it
  });

  /** The fixture job's groups once its four ranks stand in their two places (the calls start a moment after the driver prints). */
  async function fixtureGroups(): Promise<StackGroupNode[]> {
    let last = "";
    return waitFor(
      "ranks 0-2 and rank 3 of the fixture job in two groups",
      async () => {
        // What the Cluster view's "Show All Stacks" button runs.
        const result = await vscode.commands.executeCommand<StacksResult | undefined>(Commands.showStacks);
        const ids = new Set((result?.workers ?? []).filter((w) => pids.includes(w.pid)).map((w) => w.worker));
        const groups = groupsIn(api.stacks.roots).filter((g) => g.group.workers.some((id) => ids.has(id)));
        last = groups.map((g) => `${g.label}: ${g.description}`).join(" | ");
        const ready =
          groups.length === 2 &&
          groups[0].frames.some((f) => f.frame.function === "wait_for_peers") &&
          groups[1].frames.some((f) => f.frame.function === "lag");
        return ready && groups;
      },
      90_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last seen: ${last}`);
    });
  }

  it("shows ranks 0-2 and rank 3 as two groups, rank 3 marked; a click on its frame opens the fixture at that line", async function () {
    this.timeout(180_000);
    const waitLine = markerLine(fixture, "stacks-wait");
    const lagLine = markerLine(fixture, "stacks-lag");
    const [peers, lagging] = await fixtureGroups();

    assert.strictEqual(peers.label, "ranks 0-2 (3)");
    assert.strictEqual(peers.lagging, false);
    assert.ok(peers.description.startsWith(`wait_for_peers stacks_job.py:${waitLine}`), peers.description);
    assert.strictEqual(lagging.label, "rank 3 (1)");
    assert.strictEqual(lagging.lagging, true);
    assert.strictEqual(lagging.description, "behind: stack differs from ranks 0-2 (3 of 4)");
    assert.strictEqual(lagging.group.job_id, jobId, "the groups are the driver's job's");
    assert.ok(api.stacks.treeView.message?.includes("workers in"), `the view's message: ${api.stacks.treeView.message}`);

    const item = api.stacks.getTreeItem(lagging);
    assert.strictEqual(item.label, "rank 3 (1)");
    assert.strictEqual(item.contextValue, "stackGroup.lagging");
    assert.strictEqual(item.collapsibleState, vscode.TreeItemCollapsibleState.Expanded, "the lagging group opens by itself");
    assert.ok(item.iconPath instanceof vscode.ThemeIcon && item.iconPath.id === "warning", "a warning icon");
    assert.strictEqual(api.stacks.getTreeItem(peers).collapsibleState, vscode.TreeItemCollapsibleState.Collapsed);

    const frames = api.stacks.getChildren(lagging);
    const lag = frames.find((f) => f.kind === "frame" && f.frame.function === "lag");
    assert.ok(lag && lag.kind === "frame", `frames: ${frames.map((f) => f.label).join(", ")}`);
    assert.strictEqual(lag.frame.line, lagLine);
    assert.strictEqual(lag.description, `stacks_job.py:${lagLine}`);
    assert.strictEqual(frames[0].id, lag.id, "innermost first: time.sleep is C code, so lag is on top");
    assert.strictEqual(api.stacks.getParent(lag)?.id, lagging.id);

    // A click runs the item's command with its arguments.
    const frameItem = api.stacks.getTreeItem(lag);
    assert.strictEqual(frameItem.command?.command, Commands.openStackFrame);
    await vscode.commands.executeCommand(frameItem.command.command, ...(frameItem.command.arguments ?? []));
    const editor = await waitFor("the fixture open at rank 3's line", () => {
      const e = vscode.window.activeTextEditor;
      return e && e.document.uri.fsPath === fixture && e.selection.active.line === lagLine - 1 && e;
    });
    assert.match(editor.document.lineAt(lagLine - 1).text, /time\.sleep\(0\.05\)/);

    // Copy as Text on the group: its label, why, frames, as the CLI writes them.
    const text = await vscode.commands.executeCommand<string | undefined>(Commands.copyStacks, lagging);
    assert.ok(text && text.startsWith(`job ${jobId}: rank 3 (1): lag stacks_job.py:${lagLine}`), text);
    assert.ok(text.includes("\n  behind: rank 3: stack differs from ranks 0-2 (3 of 4)\n"), text);
    assert.ok(text.includes(`\n    lag  ${fixture}:${lagLine} | time.sleep(0.05)  # @bp stacks-lag\n`), text);
    assert.strictEqual(await vscode.env.clipboard.readText(), text);
  });

  it("a group's actions: Capture Here on rank 3's frame takes its locals there; Attach to Rank opens rank 3's session", async function () {
    this.timeout(180_000);
    const lagLine = markerLine(fixture, "stacks-lag");
    const [, lagging] = await fixtureGroups();
    const lag = lagging.frames.find((f) => f.frame.function === "lag");
    assert.ok(lag);
    // rank 3 passes its line every 50 ms: the snapshot point fills at once.
    const view = await vscode.commands.executeCommand<SnapshotView | undefined>(Commands.captureStackHere, lag);
    assert.ok(view, "a snapshot point was created");
    try {
      assert.strictEqual(view.title, `stacks_job.py:${lagLine} · rank 3`);
      const table = await waitFor("a captured row of rank 3", () => view.table.rows.length > 0 && view.table, 60_000);
      assert.deepStrictEqual([...new Set(table.rows.map((r) => r.rank))], [3], "only the group's rank");
      const col = table.columns.indexOf("seconds");
      assert.ok(col >= 0, `locals of lag(): ${JSON.stringify(table.columns)}`);
      assert.strictEqual(table.rows[0].cells[col], "300.0");
    } finally {
      view.close();
    }

    const session = await vscode.commands.executeCommand<vscode.DebugSession | undefined>(Commands.attachStackRank, lagging);
    assert.ok(session, "raySleuth.attachWorker opened a session");
    try {
      assert.strictEqual(session.configuration.worker, lagging.group.workers[0], "rank 3's worker");
      assert.match(session.name, /^rank 3 · Ranked · pid \d+$/);
    } finally {
      await vscode.debug.stopDebugging(session);
    }
    await waitFor("the Ray cluster session to end", () => api.sessions.clusterSession === undefined, 30_000);
  });

  it("watching for hangs: `stacks` events refresh the view, and the stuck job's notification shows the stacks", async function () {
    this.timeout(180_000);
    await fixtureGroups();
    const shown: string[] = [];
    const original = api.stacks.notifier;
    let pressed = false;
    api.stacks.notifier = (message, ...actions) => {
      shown.push(message);
      const ours = message.includes(`job ${jobId}`) && actions.includes("Show Stacks");
      pressed ||= ours;
      return Promise.resolve(ours ? "Show Stacks" : undefined);
    };
    const before = api.stacks.result?.time ?? 0;
    let refreshes = 0;
    const sub = api.stacks.onDidChangeTreeData(() => refreshes++);
    // The notification's button runs show(): count those calls.
    const show = api.stacks.show.bind(api.stacks);
    let shows = 0;
    api.stacks.show = (query) => {
      shows++;
      return show(query);
    };
    try {
      const status = await api.stacks.toggleWatch({ interval: 1, samples: 2 });
      assert.ok(status?.on, `the watch is on: ${JSON.stringify(status)}`);
      assert.strictEqual(api.stacks.watching, true);
      // Nothing here asks for stacks: the broker's samples arrive as `stacks` events.
      await waitFor("a sample pushed by the watch", () => (api.stacks.result?.time ?? 0) > before && refreshes > 0, 30_000);
      assert.match(api.stacks.treeView.message ?? "", / · \d+ workers in \d+ ms · .*watching every 1 s$/, "what a sample costs, and that the watch runs");
      await waitFor("the suspected hang of the fixture job", () => pressed, 60_000);
      const note = shown.find((m) => m.includes(`job ${jobId}`));
      assert.match(note ?? "", new RegExp(`^Ray Sleuth: suspected hang in job ${jobId}: ranks 0-3 showed the same stacks for 2 samples since .*, with no new step\\. Behind: rank 3: stack differs from ranks 0-2 \\(3 of 4\\)\\.$`));
      await waitFor("Show Stacks to take the stacks again", () => shows > 0, 30_000);
      const off = await api.stacks.toggleWatch();
      assert.strictEqual(off?.on, false);
      assert.strictEqual(api.stacks.watching, false);
      assert.ok(!api.stacks.treeView.message?.includes("watching"), api.stacks.treeView.message);
    } finally {
      sub.dispose();
      api.stacks.notifier = original;
      api.stacks.show = show;
    }
  });
});
