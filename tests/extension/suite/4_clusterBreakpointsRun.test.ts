// Editor breakpoints reaching real Ray workers (issue #4), against the demo's
// broker: a [rank 1] breakpoint stops only rank 1 of tests/fixtures/bp_job.py and
// its session opens by itself; logpoints and snapshot points capture without
// stopping. Every test removes its breakpoints and ends the runs it started.
import * as assert from "assert";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import { BrokerClient } from "../../../extension/broker/brokerClient";
import { ClusterBreakpoint, WorkerInfo } from "../../../extension/broker/types";
import { Commands } from "../../../extension/constants";
import type { SleuthAttachConfig } from "../../../extension/debug/attachConfig";
import { DapMessage, Fixture, connectedExtension, demoClient, extensionRoot, startFixture, sourceBreakpoint, trackDapMessages, waitFor, whenEnded } from "./helpers";


/** A run of tests/fixtures/bp_job.py on the demo's cluster, with its stdout's lines. */
interface FixtureRun extends Fixture {
  lines: string[];
  /** The end of its output, for failure messages. */
  output(): string;
}

function markerIndex(file: string, marker: string): number {
  const index = fs.readFileSync(file, "utf8").split("\n").findIndex((l) => l.includes(marker));
  assert.ok(index >= 0, `"${marker}" in ${file}`);
  return index;
}

describe("Cluster breakpoints stopping and capturing in bp_job.py", () => {
  let api: RaySleuthApi;
  let truth: BrokerClient;
  let root: string;
  let fixture: string;
  const messages = new Map<string, DapMessage[]>();
  const started: vscode.DebugSession[] = [];
  const disposables: vscode.Disposable[] = [];
  const runs: FixtureRun[] = [];

  const clusterSet = async (file: string): Promise<ClusterBreakpoint[]> => (await truth.getBreakpoints()).filter((b) => b.path === file);

  function runFixture(args: string[] = []): FixtureRun {
    const job = startFixture("bp_job.py", args); // stdin: the end of a --wait-stdin run
    const lines: string[] = [];
    let partial = "";
    job.child.stdout?.on("data", (chunk: string) => {
      partial += chunk;
      const parts = partial.split("\n");
      partial = parts.pop() ?? "";
      lines.push(...parts.map((l) => l.trim()));
    });
    const run = { ...job, lines, output: () => job.out().slice(-4000) };
    runs.push(run);
    return run;
  }

  /** waitFor, but failing at once (with the job's output) when the job exits first. */
  async function whileRunning<T>(run: FixtureRun, what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
    let settled = false;
    const died = new Promise<never>((_, reject) => {
      void run.exited.then((code) => {
        if (!settled) {
          reject(new Error(`bp_job.py exited (${code}) while waiting for ${what}`));
        }
      });
    });
    try {
      return await Promise.race([waitFor(what, () => (settled ? undefined : probe()), timeoutMs), died]);
    } catch (err) {
      throw new Error(`${err instanceof Error ? err.message : String(err)}; bp_job.py said: ${run.output()}`, { cause: err });
    } finally {
      settled = true;
    }
  }

  async function stopRun(run: FixtureRun): Promise<void> {
    if (run.child.exitCode === null && run.child.signalCode === null && run.child.pid) {
      run.child.kill("SIGTERM");
      await run.exited;
    }
  }

  before(async () => {
    api = await connectedExtension();
    truth = demoClient();
    root = extensionRoot();
    fixture = path.join(root, "tests", "fixtures", "bp_job.py");
    disposables.push(
      trackDapMessages(messages),
      vscode.debug.onDidStartDebugSession((s) => started.push(s)),
    );
  });

  after(async () => {
    for (const run of runs) {
      await stopRun(run);
    }
    for (const d of disposables) {
      d.dispose();
    }
    truth?.dispose();
  });

  it("a [rank 1] breakpoint stops only rank 1 of bp_job.py; its session opens by itself at the line, the others finish; continue ends the job", async function () {
    this.timeout(240_000);
    const index = markerIndex(fixture, "# @bp ext-rank-line");
    const line = index + 1;
    const bp = sourceBreakpoint(fixture, index, "[rank 1]");
    vscode.debug.addBreakpoints([bp]);
    let session: vscode.DebugSession | undefined;
    let run: FixtureRun | undefined;
    try {
      const inSet = await waitFor("GET /v1/breakpoints to list [rank 1] at the marker line", async () => (await clusterSet(fixture)).find((b) => b.line === line), 15_000);
      assert.strictEqual(inSet.condition, "[rank 1]");
      assert.strictEqual(inSet.scope, "rank 1");
      await waitFor("the marker line's annotation", () => api.decorations.annotations(fixture).find((a) => a.line === line && /^ {2}⟵ rank 1 · armed on (\d+|ranks? [\d,-]+( \+ \d+ unranked)?|\d+ unranked|none)$/.test(a.text)), 10_000);

      const startedBefore = started.length;
      run = runFixture();
      const job = run;
      session = await whileRunning(job, "rank 1's worker session to open by itself", () => started.slice(startedBefore).find((s) => /^rank 1 · RankWorker · pid \d+$/.test(s.name)), 120_000);
      const s = session;
      await waitFor("the session to be one autoAttach opened", () => api.autoAttach.opened.some((o) => o.id === s.id), 20_000);
      const workerId = (s.configuration as SleuthAttachConfig).__raySleuthWorker;
      assert.ok(workerId, "the session knows its worker");

      const stopped = await whileRunning(job, "a stopped event in rank 1's session", () => messages.get(s.id)?.find((m) => m.type === "event" && m.event === "stopped"), 45_000);
      const trace = (await s.customRequest("stackTrace", { threadId: stopped.body?.threadId as number, startFrame: 0, levels: 1 })) as {
        stackFrames: { name: string; line: number; source?: { path?: string } }[];
      };
      const top = trace.stackFrames[0];
      assert.ok(top, "a top frame");
      const topPath = top.source?.path ?? "";
      assert.strictEqual(path.basename(/^[a-z][\w+.-]*:\/\//.test(topPath) ? vscode.Uri.parse(topPath).path : topPath), "bp_job.py", JSON.stringify(top));
      assert.strictEqual(top.line, line, JSON.stringify(top));

      await whileRunning(job, "ranks 0, 2 and 3 to finish", () => ["rank 0 done", "rank 2 done", "rank 3 done"].every((l) => job.lines.includes(l)), 90_000);
      assert.ok(!job.lines.includes("rank 1 done"), `rank 1 stays paused: ${JSON.stringify(job.lines)}`);
      const paused = (await truth.getWorkers()).find((w) => w.id === workerId);
      assert.strictEqual(paused?.state, "paused", JSON.stringify(paused));
      assert.strictEqual(paused?.paused_at?.line, line);

      const values = await api.evaluate.evaluate("(self.rank, step)");
      const mine = values?.find((r) => r.worker === workerId);
      assert.ok(mine, `rank 1 in the evaluate results: ${JSON.stringify(values)}`);
      assert.strictEqual(mine.rank, 1);
      assert.strictEqual(mine.isError, false, mine.text);
      const m = /^\(1, (\d+)\)$/.exec(mine.text);
      assert.ok(m, `(rank, step) evaluated in rank 1's frame: ${mine.text}`);
      const step = Number(m[1]);

      // The user closes the session: the worker runs on, passes the line again (the next
      // step) and pauses at the same place. That is a new pause: its session opens again
      // (issue #13, item 3: auto-attach used to remember worker + line until the worker exited).
      // What the editor saw of rank 1 from here on (said when the second session does not come).
      const seen: string[] = [];
      const watch = api.state.onDidChange(() => {
        const w = api.state.workers.find((x) => x.id === workerId);
        const text = `${w?.state}@${w?.paused_at?.line ?? "-"} since ${w?.paused_since ?? "-"}`;
        if (seen.at(-1) !== text) {
          seen.push(text);
        }
      });
      disposables.push(watch);
      const ended = whenEnded(s);
      await vscode.debug.stopDebugging(s);
      await ended;
      session = undefined;
      const again = async (): Promise<WorkerInfo | undefined> => {
        const w = api.state.workers.find((x) => x.id === workerId);
        if (w?.state !== "paused" || w.paused_at?.line !== line) {
          return undefined;
        }
        const now = (await truth.evaluate("step", [1])).find((r) => r.worker === workerId);
        return now?.value === String(step + 1) ? w : undefined;
      };
      await whileRunning(job, `rank 1 to pause again at the line, at step ${step + 1}`, again, 45_000);
      const rank1Sessions = () => started.slice(startedBefore).filter((x) => /^rank 1 · RankWorker/.test(x.name));
      session = await whileRunning(job, "a second session for rank 1's new pause", () => rank1Sessions()[1], 30_000).catch((err: Error) => {
        throw new Error(`${err.message}; rank 1 as the editor saw it: ${seen.join(" → ")}; ${api.autoAttach}; session: ${api.sessions.hasSession(workerId)}`);
      });
      watch.dispose();
      const reopened = session;
      await waitFor("the new session to be one autoAttach opened", () => api.autoAttach.opened.some((o) => o.id === reopened.id), 20_000);
      assert.ok(api.sessions.hasSession(workerId));
      assert.strictEqual(rank1Sessions().length, 2, "one session per pause, not more");

      // The line is passed on every step: take the breakpoint away, then continue.
      const markerIds = (await clusterSet(fixture)).filter((b) => b.line === line).map((b) => b.id);
      vscode.debug.removeBreakpoints([bp]);
      await waitFor("the cluster set to drop the marker line", async () => !(await clusterSet(fixture)).some((b) => b.line === line), 15_000);
      // ...and rank 1 to have dropped it too (its next heartbeat): continued before, it passes
      // the line once more on the next step and stops there again.
      const armedIn = async () => (await truth.getWorkers()).find((x) => x.id === workerId)?.armed ?? [];
      await waitFor("rank 1 to disarm the line", async () => !(await armedIn()).some((id) => markerIds.includes(id)), 15_000);
      const continued = await vscode.commands.executeCommand<string[] | undefined>(Commands.continueAll);
      assert.ok(continued?.includes(workerId), `POST /v1/continue continued rank 1: ${JSON.stringify(continued)}`);
      await waitFor("rank 1 done and all done", () => job.lines.includes("rank 1 done") && job.lines.includes("all done"), 60_000).catch(async (err: Error) => {
        // What held rank 1: its state at the broker, the cluster set, the editor's breakpoints.
        const w = (await truth.getWorkers().catch(() => [])).find((x) => x.id === workerId);
        const set = await clusterSet(fixture).catch((e: Error) => e.message);
        const editor = vscode.debug.breakpoints.filter((b) => b instanceof vscode.SourceBreakpoint).map((b) => `${(b as vscode.SourceBreakpoint).location.uri.fsPath}:${(b as vscode.SourceBreakpoint).location.range.start.line + 1}`);
        throw new Error(`${err.message}; rank 1 at the broker: ${JSON.stringify({ state: w?.state, paused_at: w?.paused_at })}; cluster set: ${JSON.stringify(set)}; editor: ${JSON.stringify(editor)}; bp_job.py said: ${job.output()}`);
      });
      const code = await Promise.race([job.exited, new Promise<string>((r) => setTimeout(() => r("still running after 60 s"), 60_000).unref())]);
      assert.strictEqual(code, 0, job.output());
    } finally {
      vscode.debug.removeBreakpoints([bp]);
      if (session) {
        // The reopened session may have ended by itself already (its worker finished): wait a little only.
        const ended = whenEnded(session);
        await vscode.debug.stopDebugging(session);
        await Promise.race([ended, new Promise((r) => setTimeout(r, 5_000))]);
      }
      if (run) {
        await stopRun(run);
      }
      await api.mirror.idle();
    }
    await waitFor("the Ray cluster session to end", () => api.sessions.clusterSession === undefined, 30_000);
  });

  it("a logpoint and a snapshot point capture without stopping: [rank 3] lines in the Logpoints channel, a rank × variable table", async function () {
    this.timeout(180_000);
    const logIndex = markerIndex(fixture, "return value");
    const snapIndex = markerIndex(fixture, "return total");
    const logpoint = sourceBreakpoint(fixture, logIndex, "[rank 3]", "value={value}");
    vscode.debug.addBreakpoints([logpoint]);
    let run: FixtureRun | undefined;
    try {
      const inSet = await waitFor("the logpoint in the cluster set", async () => (await clusterSet(fixture)).find((b) => b.line === logIndex + 1), 15_000);
      assert.strictEqual(inSet.logMessage, "value={value}");
      const view = await api.snapshots.capture({ path: fixture, line: snapIndex + 1, ranks: [0, 2] });
      assert.ok(view, "the snapshot point was created");
      const startedBefore = started.length;
      const recentBefore = api.logpoints.recent.length;

      // --wait-stdin: the job's actors stay until the rows are in (Ray force-kills them when the
      // driver exits, and a row still in flight would go with them).
      run = runFixture(["--steps", "3", "--wait-stdin"]);
      const job = run;
      await waitFor("bp_job.py to run through without stopping", () => job.lines.includes("all done") || job.child.exitCode !== null, 120_000).catch((err: Error) => {
        throw new Error(`${err.message}; bp_job.py said: ${job.output()}`);
      });
      assert.ok(job.lines.includes("all done"), job.output());
      assert.strictEqual(started.length, startedBefore, "no session was opened: nothing paused");

      const expected = ["[rank 3] value=300", "[rank 3] value=301", "[rank 3] value=302"];
      const lines = await waitFor("three logpoint lines of rank 3", () => {
        const mine = api.logpoints.recent.slice(recentBefore).filter((l) => /^\[rank \d+\] value=/.test(l));
        return mine.length >= 3 && mine;
      }, 30_000).catch(async (err: Error) => {
        // Which side lost them: the broker's own record of logpoint lines, or the stream to VS Code.
        const atBroker = await truth.requestJson<{ rank: number | null; message: string }[]>("GET", "/v1/logs").catch((e: Error) => e.message);
        throw new Error(`${err.message}; VS Code got ${JSON.stringify(api.logpoints.recent.slice(recentBefore))}; the broker has ${JSON.stringify(atBroker).slice(-1500)}`);
      });
      assert.deepStrictEqual(lines, expected, "rank 3 only, in order");

      // Issue #13, item 6: in the Logpoints channel, "[rank 3]" links to that worker's output.
      api.logpoints.channel.show(true);
      const channelDoc = await waitFor("the Logpoints channel's document", () =>
        vscode.workspace.textDocuments.find((d) => d.uri.scheme === "output" && d.getText().includes(expected[2])), 15_000);
      const links = await vscode.commands.executeCommand<vscode.DocumentLink[]>("vscode.executeLinkProvider", channelDoc.uri);
      const link = links.find((l) => l.range.start.line === channelDoc.getText().split("\n").indexOf(expected[2]));
      assert.ok(link?.target, `a link on "${expected[2]}": ${JSON.stringify(links.map((l) => [l.range.start.line, l.target?.toString()]))}`);
      assert.strictEqual(link.target.scheme, "command");
      assert.strictEqual(link.target.path, Commands.showWorkerOutput);
      const [linked] = JSON.parse(decodeURIComponent(link.target.query)) as string[];
      const rank3 = api.state.workers.find((w) => w.id === linked);
      assert.strictEqual(rank3?.rank, 3, "the link names the worker of rank 3");
      const output = await vscode.commands.executeCommand<vscode.TextDocument | undefined>(Commands.showWorkerOutput, linked);
      assert.ok(output && output.uri.query.includes(`worker=${linked}&stream=out`), "the link opens rank 3's output");
      await vscode.commands.executeCommand("workbench.action.closeActiveEditor");

      const table = await waitFor("a captured row for ranks 0 and 2", () => {
        const t = view.table;
        return t.rows.length >= 2 && t;
      }, 30_000);
      assert.deepStrictEqual(table.rows.map((r) => r.rank), [0, 2]);
      const col = (name: string) => table.columns.indexOf(name);
      assert.ok(col("total") >= 0 && col("steps") >= 0, `locals of run(): ${JSON.stringify(table.columns)}`);
      assert.deepStrictEqual(table.rows.map((r) => r.cells[col("total")]), ["3", "603"]);
      assert.deepStrictEqual(table.rows.map((r) => r.differs[col("total")]), [true, true], "total differs between the ranks");
      assert.deepStrictEqual(table.rows.map((r) => r.differs[col("steps")]), [false, false], "steps is the same on both");
      job.child.stdin?.end("\n");
      const code = await Promise.race([job.exited, new Promise<string>((r) => setTimeout(() => r("still running 60 s after stdin closed"), 60_000).unref())]);
      assert.strictEqual(code, 0, job.output());
      view.close();
      await waitFor("closing the panel to end the snapshot point", async () => !(await truth.getSnapshots()).some((x) => String(x.id) === view.id), 15_000);
    } finally {
      vscode.debug.removeBreakpoints([logpoint]);
      if (run) {
        await stopRun(run);
      }
      await api.mirror.idle();
    }
    await waitFor("the cluster set to forget bp_job.py", async () => (await clusterSet(fixture)).length === 0, 15_000);
  });
});
