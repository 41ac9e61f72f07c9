// Runs the extension tests in a real VS Code: waits for the demo's broker,
// starts code-server (own process group, isolated dirs), opens the workbench in
// headless Chromium with the smoke-test payload, then a UI smoke check.
// Everything it starts it ends. Writes the merged results as JSON.
import { ChildProcess, spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { chromium, Browser, Page } from "playwright-core";
import { BrokerClient } from "../../../extension/broker/brokerClient";
import { BrokerReadyInfo } from "../../../extension/broker/types";
import { PARALLEL_UI_TITLE, parallelUiBody } from "./uiParallel";
import { STACKS_UI_TITLE, stacksUiBody } from "./uiStacks";
import { SCENARIO_TITLE, scenarioBody } from "./uiScenario";
import { pollFor } from "./uiCommon";
import { freePort } from "../ports";
import { CODE_SERVER, NODE24, ROOT, RUN_DIR, STATE_DIR, env, httpOk, prepareDirs, say, startCodeServer, stopGroup, workbenchUrl } from "./codeServer";

interface Outcome {
  title: string;
  state: "passed" | "failed" | "pending";
  error?: string;
}

const RESULTS = env("RAYSLEUTH_EXT_SUMMARY");
const DEMO_PID = Number(process.env.RAYSLEUTH_DEMO_PID ?? "0");
const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
const OUT_DIR = path.join(ROOT, "tests/extension/out");
const BROKER_TIMEOUT_MS = Number(process.env.RAYSLEUTH_BROKER_TIMEOUT_S ?? "180") * 1000;

function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  return pollFor(what, timeoutMs, probe, () => {
    if (DEMO_PID && !alive(DEMO_PID)) {
      throw new Error(`raysleuth demo (pid ${DEMO_PID}) exited while waiting for ${what}; see its log in ${RUN_DIR}`);
    }
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitForDemo(): Promise<{ url: string }> {
  const file = path.join(STATE_DIR, "broker.json");
  const info = await until(`${file}`, BROKER_TIMEOUT_MS, async () => {
    if (!fs.existsSync(file)) {
      return undefined;
    }
    const i = JSON.parse(fs.readFileSync(file, "utf8")) as BrokerReadyInfo;
    return i.ready ? i : undefined;
  });
  say(`broker ready at ${info.http}`);
  const client = new BrokerClient({ url: info.http, token: fs.readFileSync(info.token_file, "utf8").trim() });
  try {
    await until("4 workers with ranks 0..3", BROKER_TIMEOUT_MS, async () => {
      const ranks = (await client.getWorkers()).filter((w) => w.state !== "exited" && w.rank !== null).map((w) => w.rank);
      return [0, 1, 2, 3].every((r) => ranks.includes(r)) ? true : undefined;
    });
  } finally {
    client.dispose();
  }
  say("the demo's 4 ranked workers are registered");
  return { url: info.http };
}

async function runExtensionHostTests(browser: Browser, port: number, workspace: string): Promise<Outcome[]> {
  const page = await browser.newPage();
  const exited = new Promise<number>((resolve) => {
    void page.exposeFunction("codeAutomationExit", (code: number) => resolve(code));
  });
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the extension tests did not finish within 600 s")), 600_000).unref());
  await page.goto(workbenchUrl(port, workspace, true));
  const code = await Promise.race([exited, timeout]);
  await page.close();
  say(`extension host tests ended, exit code ${code}`);
  const file = path.join(RUN_DIR, "ext-host-results.json");
  if (!fs.existsSync(file)) {
    return [{ title: "extension host test run", state: "failed", error: `no results file (exit code ${code}); see ${RUN_DIR}/code-server.log` }];
  }
  const results = JSON.parse(fs.readFileSync(file, "utf8")) as { tests: Outcome[]; crash?: string };
  const outcomes = results.tests;
  if (results.crash) {
    outcomes.push({ title: "extension host test run", state: "failed", error: results.crash });
  }
  if (code !== 0 && !outcomes.some((o) => o.state === "failed")) {
    outcomes.push({ title: "extension host test run", state: "failed", error: `exit code ${code}` });
  }
  return outcomes;
}

/**
 * One UI test: a fresh workbench page with the Ray Sleuth view open; `body` does the rest.
 * Saves `<shot>.png` when it passes and `<shot>-failed.png` when it does not.
 */
async function uiTest(
  browser: Browser,
  port: number,
  workspace: string,
  title: string,
  shot: string,
  body: (page: Page) => Promise<void>,
): Promise<Outcome> {
  const page: Page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  fs.mkdirSync(OUT_DIR, { recursive: true });
  try {
    await page.goto(workbenchUrl(port, workspace, false));
    const icon = page.locator('.activitybar a.action-label[aria-label^="Ray Sleuth"]');
    await icon.waitFor({ timeout: 60_000 });
    await icon.click();
    await body(page);
    return { title, state: "passed" };
  } catch (err) {
    await page.screenshot({ path: path.join(OUT_DIR, `${shot}-failed.png`) }).catch(() => undefined);
    return { title, state: "failed", error: String(err) };
  } finally {
    await page.close();
  }
}

async function screenshot(page: Page, shot: string): Promise<void> {
  const file = path.join(OUT_DIR, `${shot}.png`);
  await page.screenshot({ path: file });
  say(`screenshot ${file}`);
}

function uiSmoke(browser: Browser, port: number, workspace: string): Promise<Outcome> {
  const title = "UI smoke: the Ray Sleuth view lists the ranked Trainer workers";
  return uiTest(browser, port, workspace, title, "cluster-view", async (page) => {
    for (let r = 0; r < 4; r++) {
      await page.getByText(new RegExp(`^rank ${r} · Trainer · pid \\d+$`)).first().waitFor({ timeout: 30_000 });
    }
    await page.locator(".statusbar").getByText(/Ray: \d+ workers/).waitFor({ timeout: 10_000 });
    await screenshot(page, "cluster-view");
  });
}

function uiAttach(browser: Browser, port: number, workspace: string): Promise<Outcome> {
  const title = "UI: a click on rank 0 attaches; the Call Stack shows it under the Ray cluster session";
  return uiTest(browser, port, workspace, title, "call-stack", async (page) => {
    const item = page.getByText(/^rank 0 · Trainer · pid \d+$/).first();
    await item.waitFor({ timeout: 30_000 });
    const label = (await item.textContent()) ?? "";
    await item.click();
    // The session starts (the debug toolbar shows); Run and Debug's Call Stack lists the parent and the worker session.
    await page.locator(".debug-toolbar").waitFor({ timeout: 30_000 });
    // force: the session-count badge lies over the icon and takes the pointer.
    await page.locator('.activitybar a.action-label[aria-label^="Run and Debug"]').click({ force: true });
    const callStack = page.locator(".debug-call-stack");
    const parent = callStack.getByText("Ray cluster").first();
    await parent.waitFor({ timeout: 30_000 });
    const child = callStack.getByText(label).first();
    // The worker session attaches after the parent starts (slower on a loaded machine), and the
    // parent row may render collapsed: expand it whenever it says so, until the child shows.
    const parentRow = callStack.locator(".monaco-list-row", { hasText: "Ray cluster" }).first();
    const deadline = Date.now() + 90_000;
    while (!(await child.isVisible())) {
      if (Date.now() > deadline) {
        throw new Error(`the worker session "${label}" never showed under "Ray cluster" in the Call Stack`);
      }
      if ((await parentRow.getAttribute("aria-expanded").catch(() => null)) === "false") {
        await parentRow.click();
      }
      // The row may say nothing while its twistie shows it collapsed: open that, as a user would.
      const twistie = parentRow.locator(".monaco-tl-twistie.collapsible.collapsed");
      if (await twistie.isVisible().catch(() => false)) {
        await twistie.click().catch(() => undefined);
      }
      await child.waitFor({ timeout: 2_000 }).catch(() => undefined);
    }
    await screenshot(page, "call-stack");
    // Stop the worker session (the focused one): the worker runs on, the parent ends with it.
    await child.click();
    await page.keyboard.press("Shift+F5");
    await parent.waitFor({ state: "detached", timeout: 20_000 });
  });
}

function uiStacks(browser: Browser, port: number, workspace: string): Promise<Outcome> {
  return uiTest(browser, port, workspace, STACKS_UI_TITLE, "stacks-view", (page) => stacksUiBody(page, ROOT, STATE_DIR, (name) => screenshot(page, name)));
}

function uiParallel(browser: Browser, port: number, workspace: string): Promise<Outcome> {
  return uiTest(browser, port, workspace, PARALLEL_UI_TITLE, "parallel-stacks", (page) => parallelUiBody(page, STATE_DIR, (name) => screenshot(page, name)));
}

/** Where the scenario takes the extension from: the packaged .vsix, installed, or this folder. */
type ScenarioTarget = "vsix" | "dev";

function scenarioTargets(): ScenarioTarget[] {
  const v = process.env.RAYSLEUTH_UI_SCENARIO ?? "vsix";
  return v === "off" ? [] : (v.split(",").map((t) => t.trim()) as ScenarioTarget[]).filter((t) => t === "vsix" || t === "dev");
}

/** Puts the extension into the scenario's own extensions dir, as a user would. */
function installForScenario(target: ScenarioTarget, dirs: Record<string, string>): string {
  const version = (JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { version: string }).version;
  if (target === "vsix") {
    const vsix = process.env.RAYSLEUTH_VSIX ?? path.join(ROOT, "dist", `raysleuth-${version}.vsix`);
    if (!fs.existsSync(vsix)) {
      throw new Error(`no ${vsix}: scripts/package.sh builds it (scripts/setup_node.sh runs it)`);
    }
    const res = spawnSync(NODE24, [CODE_SERVER, "--user-data-dir", dirs.userData, "--extensions-dir", dirs.extensions, "--install-extension", vsix], {
      encoding: "utf8",
      env: { ...process.env, HOME: dirs.home, XDG_CONFIG_HOME: dirs.xdgConfig, XDG_DATA_HOME: dirs.xdgData, XDG_CACHE_HOME: dirs.xdgCache, TMPDIR: dirs.tmp },
      timeout: 120_000,
    });
    if (res.status !== 0 || !/successfully installed/.test(res.stdout)) {
      throw new Error(`code-server --install-extension ${vsix} failed (status ${res.status}): ${res.stdout}${res.stderr}`);
    }
    return `${path.basename(vsix)} installed`;
  }
  // The development folder, linked into the extensions dir as an installed extension: the
  // smoke-test payload (extensionDevelopmentPath) works only with the driver flag.
  const name = `raysleuth.ray-sleuth-${version}`;
  const link = path.join(dirs.extensions, name);
  fs.symlinkSync(ROOT, link);
  const entry = {
    identifier: { id: "raysleuth.ray-sleuth" },
    version,
    location: { $mid: 1, fsPath: link, external: `file://${link}`, path: link, scheme: "file" },
    relativeLocation: name,
    metadata: { installedTimestamp: Date.now(), source: "vsix" },
  };
  fs.writeFileSync(path.join(dirs.extensions, "extensions.json"), JSON.stringify([entry]));
  return `${ROOT} linked`;
}

/** The scenario (uiScenario.ts) in a code-server of its own, without the smoke-test driver. */
async function uiScenario(browser: Browser, target: ScenarioTarget): Promise<Outcome> {
  const title = `${SCENARIO_TITLE} (${target === "vsix" ? "the packaged .vsix" : "the development folder"})`;
  const dirs = prepareDirs(path.join(RUN_DIR, `scenario-${target}`), true);
  const shots = path.join(OUT_DIR, `scenario-${target}`);
  fs.rmSync(shots, { recursive: true, force: true });
  fs.mkdirSync(shots, { recursive: true });
  let codeServer: ChildProcess | undefined;
  let page: Page | undefined;
  const t = Date.now();
  try {
    say(`scenario (${target}): ${installForScenario(target, dirs)}`);
    const port = await freePort();
    codeServer = startCodeServer(port, dirs, false, true);
    await until("code-server (scenario) to answer", 90_000, async () => ((await httpOk(`http://127.0.0.1:${port}/healthz`)) ? true : undefined));
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const p = page;
    await p.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.workspace)}`);
    const icon = p.locator('.activitybar a.action-label[aria-label^="Ray Sleuth"]');
    await icon.waitFor({ timeout: 60_000 });
    await icon.click();
    await scenarioBody(p, {
      root: ROOT,
      stateDir: STATE_DIR,
      say,
      shot: async (name) => {
        const file = path.join(shots, `${name}.png`);
        await p.screenshot({ path: file });
        say(`screenshot ${file}`);
      },
    });
    say(`scenario (${target}) passed in ${((Date.now() - t) / 1000).toFixed(0)} s`);
    return { title, state: "passed" };
  } catch (err) {
    await page?.screenshot({ path: path.join(shots, "failed.png") }).catch(() => undefined);
    return { title, state: "failed", error: `${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n(code-server log: ${path.dirname(dirs.userData)}/code-server.log)` };
  } finally {
    await page?.close().catch(() => undefined);
    await stopGroup(codeServer, "code-server (scenario)");
  }
}

async function main(): Promise<number> {
  let codeServer: ChildProcess | undefined;
  let browser: Browser | undefined;
  const outcomes: Outcome[] = [];
  try {
    await waitForDemo();
    const dirs = prepareDirs();
    const port = await freePort();
    codeServer = startCodeServer(port, dirs);
    await until("code-server to answer", 90_000, async () => ((await httpOk(`http://127.0.0.1:${port}/healthz`)) ? true : undefined));
    say("code-server is up");
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
    if (process.env.RAYSLEUTH_SCENARIO_ONLY !== "1") {
      outcomes.push(...(await runExtensionHostTests(browser, port, dirs.workspace)));
      if (process.env.RAYSLEUTH_SKIP_UI !== "1") {
        outcomes.push(await uiSmoke(browser, port, dirs.workspace));
        outcomes.push(await uiAttach(browser, port, dirs.workspace));
        outcomes.push(await uiStacks(browser, port, dirs.workspace));
        outcomes.push(await uiParallel(browser, port, dirs.workspace));
      }
    }
    // One code-server at a time on this machine: the scenario starts its own.
    await stopGroup(codeServer, "code-server");
    codeServer = undefined;
    for (const target of scenarioTargets()) {
      outcomes.push(await uiScenario(browser, target));
    }
  } catch (err) {
    outcomes.push({ title: "test harness", state: "failed", error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  } finally {
    await browser?.close().catch(() => undefined);
    await stopGroup(codeServer, "code-server");
  }
  for (const o of outcomes) {
    console.log(`  ${o.state === "passed" ? "✓" : o.state === "failed" ? "✗" : "-"} ${o.title}`);
    if (o.error) {
      console.log(o.error.replace(/^/gm, "      "));
    }
  }
  const count = (s: Outcome["state"]) => outcomes.filter((o) => o.state === s).length;
  const summary = { passed: count("passed"), failed: count("failed"), skipped: count("pending") };
  fs.writeFileSync(RESULTS, JSON.stringify({ ...summary, tests: outcomes }, null, 2));
  return summary.failed === 0 && summary.passed > 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
