// The UI scenario of issues 13 and 25, as a new user does it, by clicks and keys only, in a
// code-server started WITHOUT the smoke-test driver (that flag hides every notification), with
// no raySleuth setting and the folder in Restricted Mode: connect, a held crash's notification →
// Inspect (VS Code asks for trust), Continue All ends that session, a click on the record replays
// it and Continue in the replay runs nothing, click a worker to attach, a plain gutter breakpoint
// stops rank 0 only, a `[rank 0]` condition typed into the condition box, disconnect, and a click
// on the demo's divergence case in the Cases view opens its comparison across ranks (issue 26).
// runTests.ts runs it against the packaged .vsix installed into code-server (or the development
// folder) and saves a screenshot per step.
import { ChildProcess, spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { Locator, Page } from "playwright-core";
import { BrokerReadyInfo } from "../../../extension/broker/types";
import { brokerJson, eventsSince, lastSeq, trainers, until, wheelToRow } from "./uiCommon";

export const SCENARIO_TITLE =
  "UI scenario, Restricted Mode and no settings: connect, a held crash → Inspect, its replay, attach, a gutter breakpoint stops rank 0 only, [rank 0], disconnect, a divergence case's table";

export interface ScenarioContext {
  root: string;
  stateDir: string;
  /** Saves a screenshot of the page under this step's name. */
  shot: (name: string) => Promise<void>;
  say: (msg: string) => void;
}

/** The line of the demo's Trainer.step that every rank passes once per step. */
function demoEventLine(root: string): { file: string; line: number } {
  const file = path.join(root, "python_backend", "raysleuth", "cli", "demo.py");
  const line = fs.readFileSync(file, "utf8").split("\n").findIndex((l) => l.includes('raysleuth.event("step"')) + 1;
  if (line <= 0) {
    throw new Error(`no raysleuth.event("step", ...) line in ${file}`);
  }
  return { file, line };
}

/** Opens the command palette (F1); when the keys go nowhere (focus in a widget), clicks the editor's tab first. */
async function openPalette(page: Page): Promise<Locator> {
  const input = page.locator(".quick-input-widget input");
  for (let attempt = 0; ; attempt++) {
    await page.keyboard.press("F1");
    if (await input.waitFor({ state: "visible", timeout: 3_000 }).then(() => true, () => false)) {
      return input;
    }
    if (attempt === 2) {
      throw new Error("F1 did not open the command palette");
    }
    // Focus left the workbench's key handling (a clicked notification went away): click the editor's text.
    await page.keyboard.press("Escape");
    await page.locator(".editor-instance .monaco-editor .view-lines").first().click({ position: { x: 5, y: 5 } });
  }
}

/** Runs a command from the palette (F1), by its title as the palette shows it. */
async function palette(page: Page, title: string): Promise<void> {
  const input = await openPalette(page);
  await input.fill(`>${title}`);
  // Enter runs the focused row: wait until the filtered list has put it on this title (on a loaded
  // machine the list can still show an earlier filter's rows for a moment).
  const row = page.locator(".quick-input-list .monaco-list-row.focused", { hasText: title }).first();
  await row.waitFor({ timeout: 10_000 });
  await page.keyboard.press("Enter");
  await page.locator(".quick-input-widget").waitFor({ state: "hidden", timeout: 10_000 }).catch(() => undefined);
}

/** Opens a file by its absolute path through Quick Open, then puts the cursor on `line`. */
async function openAt(page: Page, file: string, line: number): Promise<void> {
  const input = page.locator(".quick-input-widget input");
  for (let attempt = 0; ; attempt++) {
    await palette(page, "Go to File...");
    if (await input.waitFor({ state: "visible", timeout: 5_000 }).then(() => true, () => false)) {
      break;
    }
    if (attempt === 2) {
      throw new Error("Go to File... did not open Quick Open");
    }
  }
  await input.fill(file);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: path.basename(file) }).first().waitFor({ timeout: 10_000 });
  await page.waitForTimeout(300); // the list settles on the typed path's entry
  await page.keyboard.press("Enter");
  await page.locator(".tabs-container .tab.active", { hasText: path.basename(file) }).waitFor({ timeout: 20_000 });
  await goToLine(page, line);
}

async function goToLine(page: Page, line: number): Promise<void> {
  const where = page.locator(".statusbar").getByText(new RegExp(`Ln ${line}, Col \\d+`));
  // ":N" in Quick Open, then Enter once its go-to-line entry has taken the text (retried: on a
  // loaded machine an Enter that comes too soon goes nowhere).
  for (let attempt = 0; attempt < 3; attempt++) {
    const input = await openPalette(page);
    await input.fill(`:${line}`);
    await page.waitForTimeout(300);
    await page.keyboard.press("Enter");
    if (await where.waitFor({ timeout: 5_000 }).then(() => true, () => false)) {
      return;
    }
    await page.keyboard.press("Escape");
  }
  throw new Error(`Go to line ${line} did not put the cursor there`);
}

/** The active editor's rendered line that holds `text`. */
function editorLine(page: Page, text: string): Locator {
  return page.locator(".editor-instance .monaco-editor .view-line", { hasText: text }).first();
}

/** Clicks the gutter (the glyph margin) next to the line holding `text`. */
async function clickGutter(page: Page, text: string): Promise<void> {
  const lineBox = await editorLine(page, text).boundingBox();
  const marginBox = await page.locator(".editor-instance .monaco-editor .margin").first().boundingBox();
  if (!lineBox || !marginBox) {
    throw new Error(`the line "${text}" or the editor's gutter is not on screen`);
  }
  await page.mouse.click(marginBox.x + 8, lineBox.y + lineBox.height / 2);
}

/** Whether rank N's row in the Cluster view says `text` (the view is brought back first: VS Code shows Run and Debug on a stop). */
async function rowSays(page: Page, rank: number, text: string | RegExp): Promise<boolean> {
  await showClusterView(page);
  return clusterRow(page, rank).getByText(text).isVisible();
}

/** The editor shows where a session stopped: the top frame's line is highlighted. */
async function stoppedLineShown(page: Page): Promise<void> {
  await page.locator(".editor-instance .monaco-editor .debug-top-stack-frame-line").first().waitFor({ state: "attached", timeout: 30_000 });
}

/** The Cluster view's title button "Continue All Paused" (shown on hover), clicked. */
async function continueAll(page: Page): Promise<void> {
  await showClusterView(page);
  const header = page.locator(".pane-header", { has: page.locator("h3.title", { hasText: /^Cluster$/ }) });
  await header.hover();
  await header.locator('a.action-label[aria-label="Continue All Paused"]').click();
}

function clusterRow(page: Page, rank: number): Locator {
  return page.locator(".pane", { has: page.locator(".pane-header h3.title", { hasText: /^Cluster$/ }) }).locator(".monaco-list-row", { hasText: new RegExp(`rank ${rank} · Trainer · pid \\d+`) }).first();
}

async function showClusterView(page: Page): Promise<void> {
  const header = page.locator(".pane-header h3.title", { hasText: /^Cluster$/ });
  if (!(await header.isVisible())) {
    // force: a badge may lie over the icon and take the pointer.
    await page.locator('.activitybar a.action-label[aria-label^="Ray Sleuth"]').click({ force: true });
    await header.waitFor({ timeout: 10_000 });
  }
}

/** The cluster set's points of every owner (checks only). */
function clusterPoints(stateDir: string): Promise<{ id: string; line: number; scope: string | null }[]> {
  return brokerJson(stateDir, "GET", "/v1/breakpoints");
}

/** The crash fixture: one actor that raises, held `hold` s for an attach while a client watches. */
function startCrashJob(root: string, stateDir: string, hold: number): { child: ChildProcess; output: () => string } {
  const info = JSON.parse(fs.readFileSync(path.join(stateDir, "broker.json"), "utf8")) as BrokerReadyInfo;
  const child = spawn(path.join(root, ".venv", "bin", "python"), [path.join(root, "tests", "fixtures", "crash_driver.py"), "--rank", "7", "--hold", String(hold)], {
    cwd: root,
    env: { ...process.env, RAY_ADDRESS: info.ray_address ?? "", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER: "0", PYTHONUNBUFFERED: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr?.setEncoding("utf8").on("data", (c: string) => (out += c));
  return { child, output: () => out };
}

/** Waits for `done`; when VS Code asks to trust the folder first (Restricted Mode), says yes as a user would. */
async function trustIfAsked(page: Page, done: Locator, timeoutMs: number): Promise<boolean> {
  const dialog = page.locator(".monaco-dialog-box").filter({ hasText: /trust/i });
  const first = await Promise.race([
    done.waitFor({ timeout: timeoutMs }).then(() => "done" as const),
    dialog.waitFor({ timeout: timeoutMs }).then(() => "dialog" as const),
  ]);
  if (first === "done") {
    return false;
  }
  await dialog.getByRole("button", { name: /trust/i }).first().click();
  await done.waitFor({ timeout: timeoutMs });
  return true;
}

/** The Ray Sleuth view titled `view` (Crashes, Cases), shown and expanded. */
async function openPane(page: Page, view: string): Promise<Locator> {
  await showClusterView(page);
  const header = page.locator(".pane-header", { has: page.locator("h3.title", { hasText: new RegExp(`^${view}$`) }) });
  if ((await header.getAttribute("aria-expanded")) === "false") {
    await header.click();
  }
  return page.locator(".pane", { has: header });
}

/** The Debug Console (a session opens it; its panel tab is clicked when another panel shows). */
async function showDebugConsole(page: Page): Promise<Locator> {
  const repl = page.locator(".repl");
  if (!(await repl.isVisible())) {
    await page.locator(".part.panel .composite-bar .action-item", { hasText: "Debug Console" }).first().click();
  }
  await repl.waitFor({ timeout: 10_000 });
  return repl;
}

export async function scenarioBody(page: Page, ctx: ScenarioContext): Promise<void> {
  const { file, line } = demoEventLine(ctx.root);
  const lineText = 'raysleuth.event("step"';
  const step = async (name: string, fn: () => Promise<void>) => {
    const t = Date.now();
    await fn();
    ctx.say(`scenario step "${name}" passed in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  };
  const errorToast = page.locator(".notification-toast", { has: page.locator(".codicon-error") });

  // 1. Connect: the extension runs in Restricted Mode, finds the demo's broker by itself (no setting) and lists the ranks.
  await step("connect in Restricted Mode, no settings", async () => {
    await page.locator(".statusbar").getByText(/Restricted Mode/).first().waitFor({ timeout: 60_000 });
    for (let r = 0; r < 4; r++) {
      await clusterRow(page, r).waitFor({ timeout: 60_000 });
    }
    await page.locator(".statusbar").getByText(/Ray: \d+ workers/).waitFor({ timeout: 10_000 });
    await ctx.shot("1-connected");
  });

  // 2. A crash, held for an attach while the folder is untrusted: its notification's Inspect
  // opens it where it raised (VS Code asks for trust before the debug session).
  const job = startCrashJob(ctx.root, ctx.stateDir, 120);
  try {
    await step("a held crash's notification → Inspect", async () => {
      // The crash fixture's (rank 7); the demo's own rank 2 crash may be notified too, not held.
      const toast = page.locator(".notification-toast", { hasText: /rank 7 .*crashed/ }).first();
      await toast.waitFor({ timeout: 90_000 });
      await ctx.shot("2-crash-notification");
      await toast.locator("a.monaco-button", { hasText: "Inspect" }).click();
      const asked = await trustIfAsked(page, page.locator(".tabs-container .tab.active", { hasText: "crash_job.py" }), 60_000);
      ctx.say(`scenario: VS Code ${asked ? "asked for trust before the debug session" : "did not ask for trust"}`);
      await stoppedLineShown(page);
      await ctx.shot("3-crash-inspect");
    });

    // 3. Continue All releases the held worker: the driver gets Ray's usual error, and the crash's session ends by itself.
    await step("Continue All releases the crash and ends its session", async () => {
      await continueAll(page);
      await until("the crash driver to get its RayTaskError", 60_000, async () => /crashed \d+ ZeroDivisionError/.test(job.output()));
      await page.locator(".debug-toolbar").waitFor({ state: "hidden", timeout: 30_000 });
    });
  } finally {
    if (job.child.exitCode === null) {
      job.child.kill("SIGTERM");
    }
  }

  // 4. A click on the record opens its replay (not "already being debugged"); Continue there runs
  // nothing and raises no error: the scene stays.
  await step("the record's replay; Continue in it runs nothing", async () => {
    const row = (await openPane(page, "Crashes")).locator(".monaco-list-row", { hasText: /rank 7 .*ZeroDivisionError/ }).first();
    await row.waitFor({ timeout: 30_000 });
    await row.click();
    await page.locator(".debug-toolbar").waitFor({ timeout: 30_000 });
    await page.locator(".tabs-container .tab.active", { hasText: "crash_job.py" }).waitFor({ timeout: 30_000 });
    await stoppedLineShown(page);
    const repl = await showDebugConsole(page);
    await page.locator(".editor-instance .monaco-editor textarea").first().focus(); // keys to the editor
    await page.keyboard.press("F5"); // Continue, as the toolbar's first button
    await repl.getByText(/nothing runs in a replay of crash/).first().waitFor({ timeout: 30_000 });
    await stoppedLineShown(page);
    if (await errorToast.first().isVisible()) {
      const message = errorToast.first().locator(".notification-list-item-message").first();
      throw new Error(`an error toast in the replay: ${await message.innerText({ timeout: 5_000 })}`);
    }
    await ctx.shot("4-replay");
    await page.keyboard.press("Shift+F5");
    await page.locator(".debug-toolbar").waitFor({ state: "hidden", timeout: 30_000 });
  });

  // 5. Click rank 0: its session starts under "Ray cluster".
  await step("click to attach", async () => {
    await clusterRow(page, 0).click();
    await page.locator(".debug-toolbar").waitFor({ timeout: 60_000 });
  });

  // 6. A plain gutter click on a line every rank passes once per step: rank 0 stops there, the
  // other ranks run on (raySleuth.plainBreakpoints' default: one rank, not one session per rank).
  await step("gutter breakpoint stops rank 0 only", async () => {
    await openAt(page, file, line);
    await clickGutter(page, lineText);
    await page.locator(".editor-instance .margin .codicon-debug-breakpoint").first().waitFor({ timeout: 10_000 });
    await until(`rank 0 paused at demo.py:${line} in the Cluster view`, 60_000, () => rowSays(page, 0, `paused at demo.py:${line}`));
    await stoppedLineShown(page);
    const point = (await clusterPoints(ctx.stateDir)).find((b) => b.line === line);
    if (point?.scope !== "first rank") {
      throw new Error(`the gutter click's point: ${JSON.stringify(point)}`);
    }
    const all = await trainers(ctx.stateDir);
    for (const r of [1, 2, 3]) {
      if (all.get(r)?.state === "paused") {
        throw new Error(`rank ${r} paused under a plain breakpoint`);
      }
    }
    await ctx.shot("5-breakpoint");
  });

  // 7. The condition box: "[rank 0]", then Continue All: only rank 0 stops again.
  await step("[rank 0] through the condition box, Continue All", async () => {
    await goToLine(page, line);
    await palette(page, "Debug: Add Conditional Breakpoint...");
    const box = page.locator(".breakpoint-widget .inputContainer");
    await box.waitFor({ timeout: 10_000 });
    await box.click();
    await page.keyboard.press("ControlOrMeta+A");
    await page.keyboard.type("[rank 0]");
    await page.keyboard.press("Enter");
    await page.locator(".editor-instance .margin .codicon-debug-breakpoint-conditional").first().waitFor({ timeout: 10_000 });
    const before = (await trainers(ctx.stateDir)).get(0)?.paused_since ?? 0;
    const seq = await lastSeq(ctx.stateDir);
    await palette(page, "Ray Sleuth: Continue All Paused");
    // Rank 0 runs on and stops at the line once more (a new pause); the others pass it.
    await until("rank 0 paused again, a new pause", 60_000, async () => {
      const r0 = (await trainers(ctx.stateDir)).get(0);
      return r0?.state === "paused" && (r0.paused_since ?? 0) > before;
    });
    await until(`rank 0 paused at demo.py:${line} in the Cluster view`, 30_000, () => rowSays(page, 0, `paused at demo.py:${line}`));
    // The line is the demo's `raysleuth.event("step", ...)`: an event from each other rank after
    // the continue says it passed the line (a stop there comes before the event).
    await until("ranks 1-3 past the line", 60_000, async () => {
      const ranks = new Set((await eventsSince(ctx.stateDir, seq, "step")).map((e) => e.rank));
      return [1, 2, 3].every((r) => ranks.has(r));
    });
    const others = await trainers(ctx.stateDir);
    for (const r of [1, 2, 3]) {
      if (others.get(r)?.state === "paused") {
        throw new Error(`rank ${r} paused under a [rank 0] breakpoint`);
      }
    }
    await ctx.shot("6-rank0-condition");
  });

  // 8. Remove the breakpoint (a gutter click) and let rank 0 go.
  await step("remove the breakpoint, Continue All", async () => {
    const ids = new Set((await clusterPoints(ctx.stateDir)).filter((b) => b.line === line).map((b) => b.id));
    await clickGutter(page, lineText);
    await until("no breakpoint in the gutter", 10_000, async () => !(await page.locator(".editor-instance .margin .codicon-debug-breakpoint-conditional").first().isVisible()));
    // The removal takes the editor, the broker and then rank 0's agent: Continue before the agent
    // let go of the point would stop rank 0 at it once more.
    await until("the point gone from the broker and disarmed in rank 0", 30_000, async () => {
      const points = await clusterPoints(ctx.stateDir);
      const r0 = (await trainers(ctx.stateDir)).get(0);
      return !points.some((b) => b.line === line) && r0 !== undefined && !(r0.armed ?? []).some((id) => ids.has(id));
    });
    const seq = await lastSeq(ctx.stateDir);
    await continueAll(page);
    await until("rank 0 running again", 60_000, async () => (await trainers(ctx.stateDir)).get(0)?.state !== "paused");
    // Two more passes of the line by rank 0 (its step events), and no stop among them.
    let stoppedAgain = false;
    await until("rank 0 past the line twice", 60_000, async () => {
      stoppedAgain = (await trainers(ctx.stateDir)).get(0)?.state === "paused";
      return stoppedAgain || (await eventsSince(ctx.stateDir, seq, "step")).filter((e) => e.rank === 0).length >= 2;
    });
    if (stoppedAgain || (await trainers(ctx.stateDir)).get(0)?.state === "paused") {
      throw new Error("rank 0 stopped again after its breakpoint was removed");
    }
  });

  // 9. Disconnect: stop the sessions from the debug toolbar; the workers run on.
  await step("disconnect", async () => {
    await until("every debug session stopped", 60_000, async () => {
      if (!(await page.locator(".debug-toolbar").isVisible())) {
        return true;
      }
      await page.keyboard.press("Shift+F5");
      await new Promise((r) => setTimeout(r, 500));
      return false;
    });
    await showClusterView(page);
    await clusterRow(page, 0).waitFor({ timeout: 10_000 });
    await ctx.shot("7-disconnected");
  });

  // 10. The demo's rank 2 drifts from step 30 under its divergence watch: that case in the Cases
  // view (wheeled to: the tests before leave many newer cases above it) opens the comparison
  // across ranks, rank 2 marked.
  await step("a click on the divergence case opens its table across ranks", async () => {
    const text = /rank 2 diverged .*\(step 30\)/;
    const pane = await openPane(page, "Cases");
    const row = pane.locator(".monaco-list-row", { hasText: text }).first();
    const place = async () => {
      const i = (await brokerJson<{ summary: string }[]>(ctx.stateDir, "GET", "/v1/cases")).findIndex((c) => text.test(c.summary));
      return i < 0 ? undefined : i;
    };
    await wheelToRow(page, pane.locator(".monaco-list").first(), row, place, 90_000);
    await row.click();
    await page.locator(".tabs-container .tab", { hasText: "Divergence across ranks" }).first().waitFor({ timeout: 30_000 });
    // A webview's page lives in an iframe inside the workbench's webview iframe; beside the code
    // the panel is narrow and shows a card per rank instead of the table.
    const panel = page.frameLocator("iframe.webview").frameLocator("iframe#active-frame");
    const marked = panel.locator("td.differs", { hasText: /^2$/ }).or(panel.locator(".card h3", { hasText: "rank 2 · differs from the majority" }));
    await marked.filter({ visible: true }).first().waitFor({ timeout: 30_000 });
    await ctx.shot("8-divergence-case");
  });
}
