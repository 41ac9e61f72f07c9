// The UI test of the Stacks view (issue #12), clicked for real in the workbench:
// with a job whose rank 3 lags (tests/fixtures/stacks_driver.py) on the demo's
// cluster, the Cluster view's "Show All Stacks" button fills the Stacks view,
// and a click on rank 3's frame opens the fixture at that line. runTests.ts
// runs it inside its uiTest (fresh page, Ray Sleuth opened, screenshots).
import { spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { Locator, Page } from "playwright-core";
import { BrokerReadyInfo } from "../../../extension/broker/types";

export const STACKS_UI_TITLE = "UI: Show All Stacks in the Cluster view's title; a click on rank 3's frame opens the fixture at its line";

/** Starts the fixture job on the demo's cluster; resolves once its calls are sent. `stop` ends it (its actors with it). */
async function startLaggingJob(root: string, stateDir: string): Promise<{ stop: () => Promise<void> }> {
  const info = JSON.parse(fs.readFileSync(path.join(stateDir, "broker.json"), "utf8")) as BrokerReadyInfo;
  const child = spawn(path.join(root, ".venv", "bin", "python"), [path.join(root, "tests", "fixtures", "stacks_driver.py"), "--seconds", "300"], {
    cwd: root,
    env: { ...process.env, RAY_ADDRESS: info.ray_address ?? "", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER: "0", PYTHONUNBUFFERED: "1" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr?.setEncoding("utf8").on("data", (c: string) => (out += c));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.stdin?.end();
      const timer = setTimeout(() => child.kill("SIGTERM"), 30_000);
      await exited;
      clearTimeout(timer);
    }
  };
  const deadline = Date.now() + 90_000;
  while (!/^job \S+ pids [\d ]+$/m.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`stacks_driver.py did not start its job: ${out.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { stop };
}

/** Scrolls the pane's list with the mouse wheel until the row is wholly inside the list's box
 * (trees render only the rows in view, and a row cut by the pane's edge takes a click meant for
 * it on whatever lies there: seen under load, the click folded the row above). */
async function scrollTo(page: Page, pane: Locator, row: Locator, steps: number): Promise<boolean> {
  const list = pane.locator(".monaco-list").first();
  await list.hover();
  for (let i = 0; i < steps; i++) {
    const [outer, box] = (await row.isVisible()) ? [await list.boundingBox(), await row.boundingBox()] : [null, null];
    if (outer && box && box.y >= outer.y && box.y + box.height <= outer.y + outer.height) {
      return true;
    }
    await page.mouse.wheel(0, outer && box ? (box.y < outer.y ? -40 : 40) : 150);
    await page.waitForTimeout(100); // the wheel's own pace; the loop checks the row again
  }
  return false;
}

export async function stacksUiBody(page: Page, root: string, stateDir: string, shot: (name: string) => Promise<void>): Promise<void> {
  const fixture = path.join(root, "tests", "fixtures", "stacks_job.py");
  const lagLine = fs.readFileSync(fixture, "utf8").split("\n").findIndex((l) => l.includes("@bp stacks-lag")) + 1;
  const job = await startLaggingJob(root, stateDir);
  try {
    // Connected: the status bar counts the workers. (The Cluster view renders only the rows in
    // view, and the job's "Ranked" group sorts above the demo's Trainers: a Trainer row may be
    // out of view, so it is not what this waits for.)
    await page.locator(".statusbar").getByText(/Ray: \d+ workers/).waitFor({ timeout: 30_000 });
    const clusterHeader = page.locator(".pane-header", { has: page.locator("h3.title", { hasText: /^Cluster$/ }) });
    const stacksPane = page.locator(".pane", { has: page.locator(".pane-header h3.title", { hasText: /^Stacks$/ }) });
    // Only rank 3's `lag` frame stands at that line: its row's description is exactly the place
    // (the group row above it names the place too, inside "stack differs: lag stacks_job.py:N ←
    // …", and a click there only folds the group; which of the two is rendered first varied).
    const lagRow = stacksPane.locator(".monaco-list-row").filter({
      has: page.locator(".label-description", { hasText: new RegExp(`^stacks_job\\.py:${lagLine}$`) }),
    });
    // The fixture's calls start a moment after the driver prints: ask again until rank 3 stands at its line.
    const deadline = Date.now() + 90_000;
    for (;;) {
      await clusterHeader.hover();
      await clusterHeader.locator('a.action-label[aria-label="Show All Stacks"]').click();
      await stacksPane.locator(".monaco-list-row").first().waitFor({ timeout: 30_000 });
      if (await scrollTo(page, stacksPane, lagRow.first(), 40)) {
        break;
      }
      if (Date.now() > deadline) {
        throw new Error(`rank 3's frame at stacks_job.py:${lagLine} never showed in the Stacks view`);
      }
    }
    const tab = page.locator(".tabs-container .tab.active", { hasText: "stacks_job.py" });
    for (let attempt = 0; ; attempt++) {
      await lagRow.first().click();
      if (await tab.waitFor({ timeout: 20_000 }).then(() => true, () => false)) {
        break;
      }
      if (attempt === 2 || !(await scrollTo(page, stacksPane, lagRow.first(), 40))) {
        throw new Error(`a click on rank 3's frame (stacks_job.py:${lagLine}) opened no editor tab in 3 tries`);
      }
    }
    await page.locator(".statusbar").getByText(`Ln ${lagLine}, Col 1`).waitFor({ timeout: 20_000 });
    await shot("stacks-view");
  } finally {
    await job.stop();
  }
}
