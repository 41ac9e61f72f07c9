// What the UI tests share: waiting for a condition, the mouse wheel over a list until a row
// shows, and the broker's answers read for checks (the steps themselves are clicks and keys).
import * as fs from "fs";
import * as path from "path";
import type { Locator, Page } from "playwright-core";
import { BrokerReadyInfo } from "../../../extension/broker/types";

/** Polls `probe` until it says true (a throw counts as not yet); fails after `timeoutMs`. */
export async function until(what: string, timeoutMs: number, probe: () => Promise<boolean>): Promise<void> {
  await pollFor(what, timeoutMs, async () => ((await probe()) ? true : undefined));
}

/** Polls `probe` every 250 ms until it gives a value, for at most `timeoutMs`; a probe that throws
 * counts as "not yet" (the last error is in the timeout's message); `guard` may throw to stop early,
 * e.g. when a process the wait needs has exited. */
export async function pollFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, guard?: () => void): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    guard?.();
    try {
      const v = await probe();
      if (v !== undefined) {
        return v;
      }
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`Timed out after ${timeoutMs / 1000} s waiting for ${what}${last ? `: ${String(last)}` : ""}`);
}

/** One request to the broker that `stateDir/broker.json` names, with its token; the JSON answer. */
export async function brokerJson<T>(stateDir: string, method: string, route: string, body?: unknown): Promise<T> {
  const info = JSON.parse(fs.readFileSync(path.join(stateDir, "broker.json"), "utf8")) as BrokerReadyInfo;
  const token = fs.readFileSync(info.token_file, "utf8").trim();
  const res = await fetch(`${info.http}${route}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) {
    throw new Error(`${method} ${route}: HTTP ${res.status} ${await res.text()}`);
  }
  return (await res.json()) as T;
}

export interface WorkerRow {
  id: string;
  /** Ids of the cluster points armed in it now (its agent's last report). */
  armed?: string[];
  job_id?: string | null;
  rank: number | null;
  actor_class: string | null;
  state: string;
  paused_since?: number | null;
}

/** The demo's Trainer workers as the broker lists them, by rank. */
export async function trainers(stateDir: string): Promise<Map<number, WorkerRow>> {
  const rows = await brokerJson<WorkerRow[]>(stateDir, "GET", "/v1/workers");
  return new Map(rows.filter((w) => w.actor_class === "Trainer" && w.rank !== null && w.state !== "exited").map((w) => [w.rank as number, w]));
}

export interface EventRow {
  seq: number;
  name: string;
  rank: number | null;
}

/** The timeline's entries named `name` after `since` (GET /v1/events). */
export function eventsSince(stateDir: string, since: number, name: string): Promise<EventRow[]> {
  return brokerJson(stateDir, "GET", `/v1/events?since=${since}&name=${encodeURIComponent(name)}`);
}

/** The newest timeline entry's seq (0 when there is none). */
export async function lastSeq(stateDir: string): Promise<number> {
  const all = await brokerJson<EventRow[]>(stateDir, "GET", "/v1/events");
  return all.reduce((m, e) => Math.max(m, e.seq), 0);
}

/**
 * Turns the mouse wheel over `list` (a view's list) until `row` shows whole inside it, as a person
 * scrolls: a list draws only the rows in view, so a row far down is not on the page until then.
 * `place` says where the row stands in the list (its index, from the broker's order), which tells
 * the wheel's direction while the row is not drawn; each turn is half the list's height.
 */
export async function wheelToRow(page: Page, list: Locator, row: Locator, place: () => Promise<number | undefined>, timeoutMs: number): Promise<void> {
  await until("the row to show in its list (mouse wheel)", timeoutMs, async () => {
    const box = await list.boundingBox({ timeout: 5_000 });
    if (!box || box.height < 1) {
      return false;
    }
    const at = (await row.count()) ? await row.boundingBox({ timeout: 5_000 }) : null;
    let dy: number;
    if (at) {
      if (at.y >= box.y && at.y + at.height <= box.y + box.height + 0.5) {
        return true;
      }
      dy = at.y < box.y ? at.y - box.y : at.y + at.height - (box.y + box.height);
    } else {
      const target = await place();
      const drawn = await list.locator(".monaco-list-row").evaluateAll((els) => els.map((e) => Number(e.getAttribute("data-index"))));
      if (target === undefined || !drawn.length) {
        return false;
      }
      dy = (target > Math.max(...drawn) ? 1 : -1) * Math.max(10, box.height / 2);
    }
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, dy);
    return false;
  });
}
