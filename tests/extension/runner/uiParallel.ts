// The UI test of the Parallel Stacks view (issue 27), clicked for real in the workbench: the
// view's title action takes the merged tree, a right click on the demo job's root (its four
// Trainer ranks) → "Make Rank Group…" and a typed name make the group, and the same node's
// "Pause Group" and "Continue Group" pause its workers and resume them, each saying so.
// runTests.ts runs it inside its uiTest (fresh page, Ray Sleuth opened, screenshots).
import { Locator, Page } from "playwright-core";
import { brokerJson, trainers, until } from "./uiCommon";

export const PARALLEL_UI_TITLE = "UI: Parallel Stacks: a right click on the job's root makes a rank group; its Pause and Continue Group stop and resume its ranks";

const GROUP = "ui-trainers";

/** Right-clicks `row` and runs the context menu's `action` until `done()` says it took effect.
 * Under load (seen in CI) a click can land while the menu still settles (the menu stays open:
 * click again, or Enter on the item, as a user would), and the menu can close before the click
 * (the tree re-rendered or the row's hover took the focus): then it is opened again. */
async function contextAction(page: Page, row: Locator, action: string, done: () => Promise<boolean>): Promise<void> {
  const item = page.getByRole("menuitem", { name: action }).first();
  for (let attempt = 0; attempt < 4; attempt++) {
    if (!(await item.isVisible())) {
      await row.click({ button: "right" });
      if (!(await item.waitFor({ timeout: 10_000 }).then(() => true, () => false))) {
        continue;
      }
    }
    const take = attempt % 2 === 0 ? item.click({ timeout: 5_000 }) : item.hover({ timeout: 5_000 }).then(() => page.keyboard.press("Enter"));
    if (!(await take.then(() => true, () => false))) {
      continue;
    }
    if (await until(`"${action}" to take effect`, 20_000, done).then(() => true, () => false)) {
      return;
    }
  }
  throw new Error(`the context menu's "${action}" did not take effect in 4 tries`);
}

export async function parallelUiBody(page: Page, stateDir: string, shot: (name: string) => Promise<void>): Promise<void> {
  await page.locator(".statusbar").getByText(/Ray: \d+ workers/).waitFor({ timeout: 30_000 });
  const ranked = [...(await trainers(stateDir)).values()];
  const jobId = ranked.find((w) => w.job_id)?.job_id;
  if (ranked.length !== 4 || !jobId) {
    throw new Error(`the demo's four Trainer ranks with their job: ${JSON.stringify(ranked)}`);
  }
  const ids = new Set(ranked.map((w) => w.id));
  const header = page.locator(".pane-header", { has: page.locator("h3.title", { hasText: /^Parallel Stacks$/ }) });
  const pane = page.locator(".pane", { has: header });
  if ((await header.getAttribute("aria-expanded")) === "false") {
    await header.click();
  }
  // The job's root: its label names the job, its description the four ranks (and how many
  // workers: the job's unranked task worker too, when it stands in Python).
  const root = pane.locator(".monaco-list-row", { hasText: `job ${jobId.slice(0, 8)}` }).filter({ hasText: /ranks 0-3 \(\d+\)/ }).first();
  await until("the demo job's root in the Parallel Stacks view", 60_000, async () => {
    await header.hover();
    await header.locator('a.action-label[aria-label="Show Parallel Stacks"]').click();
    return root.waitFor({ timeout: 5_000 }).then(() => true);
  });
  await shot("parallel-stacks");
  try {
    const input = page.locator(".quick-input-widget input");
    await contextAction(page, root, "Make Rank Group…", () => input.isVisible());
    await input.fill(GROUP);
    await page.keyboard.press("Enter");
    await page.getByText(`group "${GROUP}" is ranks 0,1,2,3`).first().waitFor({ timeout: 20_000 });
    const groups = await brokerJson<{ name: string; ranks: number[]; job_id?: string | null }[]>(stateDir, "GET", "/v1/groups");
    const made = groups.find((g) => g.name === GROUP);
    if (JSON.stringify(made?.ranks) !== "[0,1,2,3]" || made?.job_id !== jobId) {
      throw new Error(`group ${GROUP} as the broker holds it: ${JSON.stringify(made)}`);
    }
    // Ranks inside a step stop at once; a rank idle between steps (in Ray's loop, not in Python)
    // stops when it next runs Python: the report names both kinds.
    const paused = page.getByText(/Ray Sleuth: .*(paused rank|will pause when)/).first();
    await contextAction(page, root, "Pause Group", () => paused.isVisible());
    await until("a Trainer rank paused", 30_000, async () => [...(await trainers(stateDir)).values()].some((w) => w.state === "paused"));
    await shot("parallel-stacks-paused");
    const continued = page.getByText(/Ray Sleuth: (continued|called off)/).first();
    await contextAction(page, root, "Continue Group", () => continued.isVisible());
    await until("the four Trainer ranks running again", 60_000, async () => [...(await trainers(stateDir)).values()].every((w) => w.state !== "paused"));
  } finally {
    await brokerJson(stateDir, "POST", "/v1/continue", { workers: [...ids] }).catch(() => undefined);
    await brokerJson(stateDir, "DELETE", `/v1/groups/${GROUP}`).catch(() => undefined);
  }
}
