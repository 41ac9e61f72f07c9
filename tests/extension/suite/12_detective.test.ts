// The detective and parallel debugging in the editor (issues 26 and 27), against the demo's real
// broker: the Cases view lists the demo's divergence (rank 2 at step 30) and its crash, and the
// divergence opens the comparison table; a stuck job's hang and a growing fake GPU's memory
// case join them, and open the Stacks view and the GPU chart; "Rerun Under Debugger" on a failed task's crash record
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
import type { CaseSummary } from "../../../extension/broker/types";
import { DapMessage, connectedExtension, demoBroker, demoClient, extensionRoot, startFixture, trackDapMessages, waitFor } from "./helpers";

/** The fake-GPU actor's rank here (10_tensors' is 8). */
const LEAK_RANK = 13;

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
    // The demo's rank 2 crashes at step 40, after the divergence.
    await waitFor(
      "the demo's crash case naming rank 2",
      async () => {
        await api.cases.refresh();
        return api.cases.cases.some((c) => c.kind === "crash" && /rank 2/.test(c.summary));
      },
      60_000,
    );
    await vscode.commands.executeCommand(Commands.openCase, divergence.id);
    const html = await waitFor("the comparison table", () => api.cases.divergencePanel?.webview.html, 10_000);
    assert.match(html, /grad_scale/);
    assert.match(html, /rank 2/);
  });

  it("the Cases view lists a stuck job's hang and a growing GPU's memory case beside the demo's kinds; each opens its scene", async function () {
    this.timeout(240_000);
    const client = demoClient();
    const rayAddress = demoBroker().rayAddress ?? "";
    const stuck = startFixture("hang_driver.py", ["stuck", rayAddress]);
    const leak = startFixture("gpu_driver.py", [String(LEAK_RANK)]);
    try {
      const job = (JSON.parse((await stuck.match("the stuck job's id", /^(\{"job_id".*\})$/m))[1]) as { job_id: string }).job_id;
      await leak.match("the GPU job's actor", /pid (\d+)/);
      await client.requestJson("PUT", "/v1/stacks/watch", { interval: 0.6, samples: 5 });
      const findCase = async (test: (c: CaseSummary) => boolean) => {
        await api.cases.refresh();
        return api.cases.cases.find(test);
      };
      // 512 MiB more on the fake GPU at each line, until the broker files the growth as a case.
      let sent = 0;
      const memory = await waitFor(
        `a memory case naming rank ${LEAK_RANK}`,
        async () => {
          const found = await findCase((c) => c.kind === "memory" && c.ranks.includes(LEAK_RANK));
          if (!found && (leak.out().match(/^used \d+$/gm) ?? []).length >= sent) {
            sent++;
            leak.child.stdin?.write("\n");
          }
          return found;
        },
        90_000,
      );
      const hang = await waitFor("a hang case for the stuck job", () => findCase((c) => c.kind === "hang" && c.job_id === job), 90_000);
      // The demo's own crash (step 40) and divergence (step 30) are the other two kinds.
      const kinds = await waitFor("four kinds of case", async () => (await findCase(() => true)) && new Set(api.cases.cases.map((c) => c.kind)).size >= 4 && new Set(api.cases.cases.map((c) => c.kind)), 60_000);
      assert.deepStrictEqual([...kinds].sort(), ["crash", "divergence", "hang", "memory"], JSON.stringify(api.cases.cases.map((c) => c.summary)));
      await vscode.commands.executeCommand(Commands.openCase, hang.id);
      const stacks = await waitFor("the Stacks view on the stuck job", () => api.stacks.result?.workers.some((w) => w.job_id === job) && api.stacks.result, 30_000);
      assert.ok(stacks.workers.every((w) => w.job_id === job), JSON.stringify(stacks.workers.map((w) => w.job_id)));
      await vscode.commands.executeCommand(Commands.openCase, memory.id);
      const worker = (await client.getWorkers()).find((w) => w.rank === LEAK_RANK && w.state !== "exited");
      assert.ok(worker, `the rank ${LEAK_RANK} worker is listed`);
      await waitFor("the GPU chart of the growing worker", () => [...api.gpu.charts.values()].find((c) => c.target.kind === "worker" && c.target.id === worker.id), 30_000);
    } finally {
      await client.requestJson("DELETE", "/v1/stacks/watch").catch(() => undefined);
      await Promise.all([stuck.stop(), leak.stop()]);
    }
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
      // A rank idle between steps pauses when it next runs Python (`pending`); one paused
      // mid-step holds the lockstep driver, so the other may stay pending: both are answers.
      const pair = (await client.getWorkers()).filter((w) => w.actor_class === "Trainer" && w.state !== "exited" && (w.rank === 0 || w.rank === 1)).map((w) => w.id);
      const asked = await client.pauseWorkers({ group: "ext-pair" });
      const answered = [...(asked.paused ?? []), ...(asked.pending ?? []).map((p) => p.worker)];
      assert.deepStrictEqual(answered.sort(), [...pair].sort(), JSON.stringify(asked));
      await waitFor(
        "rank 0 or 1 paused, 2 and 3 not",
        async () => {
          const ws = (await client.getWorkers()).filter((w) => w.actor_class === "Trainer" && w.state !== "exited");
          const byRank = new Map(ws.map((w) => [w.rank, w.state]));
          return (byRank.get(0) === "paused" || byRank.get(1) === "paused") && byRank.get(2) !== "paused" && byRank.get(3) !== "paused";
        },
        60_000,
      );
      const reply = await client.continueWorkers({ group: "ext-pair" });
      assert.strictEqual((reply.continued ?? []).length + (reply.cancelled ?? []).length, 2, JSON.stringify(reply));
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

