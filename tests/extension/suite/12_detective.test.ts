// The detective and parallel debugging in the editor (issues 26 and 27), against the demo's real
// broker: the Cases view lists the demo's divergence (rank 2 at step 30) and its crash, and the
// divergence opens the comparison table; "Rerun Under Debugger" on a failed task's crash record
// opens a session stopped at the function's first line with the failed call's arguments; a rank
// group made from a Parallel Stacks node is what the Ray cluster session then acts on, and its
// pause and continue touch exactly its ranks.
import * as assert from "assert";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import { Commands } from "../../../extension/constants";
import type { ParallelItem } from "../../../extension/views/parallelTree";
import { DapMessage, connectedExtension, demoClient, extensionRoot, startFixture, trackDapMessages, waitFor } from "./helpers";

describe("The detective and rank groups against the demo's real broker", function () {
  let api: RaySleuthApi;
  let root: string;
  const messages = new Map<string, DapMessage[]>();
  const disposables: vscode.Disposable[] = [];

  before(async () => {
    api = await connectedExtension();
    root = extensionRoot();
    disposables.push(trackDapMessages(messages));
  });

  after(() => {
    for (const d of disposables) {
      d.dispose();
    }
  });

  it("the Cases view lists the demo's divergence naming rank 2 at step 30 and its crash; the divergence opens the comparison table", async function () {
    this.timeout(120_000);
    const divergence = await waitFor(
      "the demo's divergence case",
      async () => {
        await api.cases.refresh();
        return api.cases.cases.find((c) => c.kind === "divergence" && /^rank 2 diverged .*\(step 30\)/.test(c.summary));
      },
      90_000,
    );
    assert.deepStrictEqual(divergence.ranks, [2]);
    assert.ok(api.cases.cases.some((c) => c.kind === "crash" && /rank 2/.test(c.summary)), JSON.stringify(api.cases.cases.map((c) => c.summary)));
    await vscode.commands.executeCommand(Commands.openCase, divergence.id);
    const html = await waitFor("the comparison table", () => api.cases.divergencePanel?.webview.html, 10_000);
    assert.match(html, /grad_scale/);
    assert.match(html, /rank 2/);
  });

  it("Rerun Under Debugger on a failed task's crash opens a session stopped at its first line with the failed call's arguments", async function () {
    this.timeout(180_000);
    const fixture = path.join(root, "tests", "fixtures", "rerun_job.py");
    const firstLine = fs.readFileSync(fixture, "utf8").split("\n").findIndex((l) => l.includes("@bp rerun-first")) + 1;
    const known = new Set(api.crashes.crashes.map((c) => c.id));
    const driver = startFixture("rerun_driver.py");
    let session: vscode.DebugSession | undefined;
    try {
      await driver.match("the failed task", /failed task: ValueError/);
      const crash = await waitFor(
        "the task's crash record, kept for a rerun",
        () => api.crashes.crashes.find((c) => !known.has(c.id) && c.exc_type === "ValueError" && c.can_rerun),
        60_000,
      );
      assert.strictEqual(api.crashes.getTreeItem(crash).contextValue, "crashRerun", "the row offers Rerun Under Debugger");
      session = (await vscode.commands.executeCommand<vscode.DebugSession | undefined>(Commands.rerunCrash, crash.id)) ?? undefined;
      assert.ok(session, "a debug session on the rerun");
      const live = session;
      const stopped = await waitFor("the rerun's stop", () => (messages.get(live.id) ?? []).find((m) => m.event === "stopped"), 60_000);
      const threadId = stopped.body?.threadId as number;
      const trace = (await live.customRequest("stackTrace", { threadId })) as { stackFrames: { id: number; name: string; line: number }[] };
      assert.strictEqual(trace.stackFrames[0].name, "scale");
      assert.strictEqual(trace.stackFrames[0].line, firstLine);
      const args = (await live.customRequest("evaluate", { expression: "(values, factor, shift)", frameId: trace.stackFrames[0].id, context: "repl" })) as { result: string };
      assert.strictEqual(args.result, "([1, 2, 3], 0, 5)");
      await live.customRequest("continue", { threadId });
      await waitFor("the rerun's own ValueError", () => api.crashes.crashes.find((c) => !known.has(c.id) && c.id !== crash.id && c.exc_type === "ValueError"), 60_000);
    } finally {
      if (session) {
        await vscode.debug.stopDebugging(session);
      }
      await driver.stop();
    }
  });

  it("a group made from a Parallel Stacks node is chosen for the Ray cluster session; its pause and continue touch exactly its ranks", async function () {
    this.timeout(120_000);
    const client = demoClient();
    const roots = await waitFor("the Trainers' merged stacks", async () => (await api.parallelStacks.refresh()).length > 0 && api.parallelStacks.roots, 30_000);
    const trainers = roots.find((r) => r.node.ranks.length >= 4);
    assert.ok(trainers, `a root with the four ranks: ${JSON.stringify(roots.map((r) => r.node.ranks))}`);
    // The node's ranks 0 and 1, as a node of the tree holds them when those two stand apart.
    const item: ParallelItem = { ...trainers, node: { ...trainers.node, ranks: [0, 1] } };
    const name = await api.parallelStacks.makeGroup(item, "ext-pair");
    assert.strictEqual(name, "ext-pair");
    const groups = await client.requestJson<{ name: string; ranks: number[] }[]>("GET", "/v1/groups");
    assert.deepStrictEqual(groups.find((g) => g.name === "ext-pair")?.ranks, [0, 1]);
    await vscode.commands.executeCommand(Commands.chooseRankGroup, "ext-pair");
    assert.strictEqual(api.groupChoice.current, "ext-pair");
    try {
      await client.requestJson("POST", "/v1/pause", { group: "ext-pair" });
      const paused = await waitFor(
        "ranks 0 and 1 paused, 2 and 3 running",
        async () => {
          const ws = (await client.getWorkers()).filter((w) => w.actor_class === "Trainer" && w.state !== "exited");
          const byRank = new Map(ws.map((w) => [w.rank, w.state]));
          return byRank.get(0) === "paused" && byRank.get(1) === "paused" && byRank.get(2) !== "paused" && byRank.get(3) !== "paused" && ws;
        },
        60_000,
      );
      assert.strictEqual(paused.filter((w) => w.state === "paused").length, 2);
      const reply = await client.continueWorkers({ group: "ext-pair" });
      assert.strictEqual(reply.continued.length, 2);
    } finally {
      await client.continueWorkers({ group: "ext-pair" });
      api.groupChoice.set(undefined);
      await client.requestJson("DELETE", "/v1/groups/ext-pair");
    }
  });

  it("Compare Across Paused Ranks on a variable: three paused ranks give three rows, rank 2's grad marked", async function () {
    this.timeout(120_000);
    const client = demoClient();
    const demo = path.join(root, "python_backend", "raysleuth", "cli", "demo.py");
    const line = fs.readFileSync(demo, "utf8").split("\n").findIndex((l) => l.includes('raysleuth.inspect("grad", grad, step=step)')) + 1;
    const owner = "ext-compare";
    // All-stop would pause ranks 1-2 wherever they are once rank 0 stops: off for this test.
    const allStop = (await client.getSettings()).all_stop;
    await client.requestJson("PUT", "/v1/settings", { all_stop: false });
    // A step a few ahead, armed in ranks 0-2 before they get there: a rank that passed the line
    // unarmed would finish its step while the others wait stopped, and the driver's next step
    // (which needs all four) would never come to it.
    const stepNow = async () =>
      Math.max(0, ...(await client.requestJson<{ fields?: { step?: unknown } }[]>("GET", "/v1/events?name=step")).map((e) => Number(e.fields?.step) || 0));
    const armed = async () => {
      const bps = await client.requestJson<{ owner: string; armed_on: { rank: number | null }[] }[]>("GET", "/v1/breakpoints");
      const b = bps.find((x) => x.owner === owner);
      return b !== undefined && [0, 1, 2].every((r) => b.armed_on.some((w) => w.rank === r));
    };
    for (let attempt = 0; ; attempt++) {
      const at = (await stepNow()) + 8;
      await client.requestJson("PUT", "/v1/breakpoints", { path: demo, owner, breakpoints: [{ line, condition: `[rank 0-2] step == ${at}` }] });
      await waitFor("the breakpoint armed in ranks 0-2", armed, 30_000);
      if ((await stepNow()) < at - 1 || attempt >= 3) {
        break;
      }
    }
    try {
      await waitFor(
        "ranks 0-2 paused at the inspect line",
        async () => {
          const ws = (await client.getWorkers()).filter((w) => w.actor_class === "Trainer" && w.state === "paused" && w.paused_at?.line === line);
          return ws.length === 3 && ws;
        },
        60_000,
      );
      await client.requestJson("PUT", "/v1/breakpoints", { path: demo, owner, breakpoints: [] });
      // As the Variables pane's context menu hands it over.
      const rows = await api.evaluate.compareVariable({ container: { name: "Locals" }, variable: { name: "grad", evaluateName: "grad", value: "array(...)" } });
      assert.ok(rows, "rows");
      assert.deepStrictEqual(rows.map((r) => r.rank), [0, 1, 2]);
      assert.deepStrictEqual(rows.map((r) => r.differs), [false, false, true], JSON.stringify(rows));
    } finally {
      await client.requestJson("PUT", "/v1/breakpoints", { path: demo, owner, breakpoints: [] });
      await client.continueWorkers({ ranks: [0, 1, 2] });
      await client.requestJson("PUT", "/v1/settings", { all_stop: allStop });
    }
  });
});

