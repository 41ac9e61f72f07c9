// The rank group the "Ray cluster" session acts on (issue 27): its toolbar's Continue, Pause and
// Step, and the Call Stack's, go to the chosen group's members (GET /v1/groups) instead of every
// worker session under it. A status bar item names the group while one is chosen; a click
// chooses again. No group chosen: every worker session, as before.
import * as vscode from "vscode";
import { Commands } from "../constants";
import { log } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import type { BrokerAccess } from "../broker/brokerConnection";
import type { RankGroup } from "../broker/types";
import { formatRanks } from "../common/ranks";

/** The context key menus read: set while a group is chosen. */
const CONTEXT_KEY = "raySleuth.rankGroup";

export class GroupChoice implements vscode.Disposable {
  private chosen: string | undefined;
  private readonly item: vscode.StatusBarItem;
  private readonly changed = new vscode.EventEmitter<string | undefined>();
  readonly onDidChange = this.changed.event;

  constructor(private readonly broker: BrokerAccess) {
    this.item = vsapi.createStatusBarItem("raySleuth.rankGroup", vscode.StatusBarAlignment.Left, 49);
    this.item.command = Commands.chooseRankGroup;
    this.item.name = "Ray Sleuth rank group";
  }

  /** The group's name, or undefined for every worker session. */
  get current(): string | undefined {
    return this.chosen;
  }

  toString(): string {
    return `GroupChoice[${this.chosen ?? "all sessions"}]`;
  }

  /** Chooses (or clears, with undefined) the group; shows it in the status bar. */
  set(name: string | undefined, ranks?: readonly number[]): void {
    this.chosen = name;
    void vsapi.executeCommand("setContext", CONTEXT_KEY, name ?? "");
    if (name) {
      this.item.text = `$(organization) ${name}`;
      this.item.tooltip = `The Ray cluster session's Continue, Pause and Step act on rank group "${name}"${ranks?.length ? ` (ranks ${formatRanks(ranks)})` : ""}. Click to choose another.`;
      this.item.show();
    } else {
      this.item.hide();
    }
    log.info(`Ray cluster session acts on ${name ? `rank group ${name}` : "every worker session"}`);
    this.changed.fire(name);
  }

  /** raySleuth.chooseRankGroup: a pick of the broker's groups, or every worker session. */
  async choose(name?: string): Promise<string | undefined> {
    const client = await this.broker.ensureClient();
    if (!client) {
      return undefined;
    }
    const groups = await client.requestJson<RankGroup[]>("GET", "/v1/groups");
    if (typeof name === "string") {
      const g = groups.find((x) => x.name === name);
      if (!g) {
        void vsapi.showErrorMessage(`Ray Sleuth: no rank group "${name}". Make one with "Make Rank Group…" in the Parallel Stacks view or \`raysleuth group ${name} --ranks 0,3\`.`);
        return undefined;
      }
      this.set(g.name, g.ranks);
      return g.name;
    }
    const every = { label: "$(debug-alt) Every worker session", description: "the default", name: undefined as string | undefined, ranks: [] as number[] };
    const picks = [every, ...groups.map((g) => ({ label: g.name, description: describe(g), name: g.name as string | undefined, ranks: g.ranks }))];
    const pick = await vscode.window.showQuickPick(picks, { title: "Ray Sleuth: the rank group the Ray cluster session acts on", placeHolder: this.chosen ? `now: ${this.chosen}` : "now: every worker session" });
    if (!pick) {
      return this.chosen;
    }
    this.set(pick.name, pick.ranks);
    return pick.name;
  }

  /** The worker ids of the chosen group's live members now; undefined when no group is chosen. */
  async members(): Promise<string[] | undefined> {
    const name = this.chosen;
    if (!name) {
      return undefined;
    }
    const client = await this.broker.ensureClient();
    const group = (await client?.requestJson<RankGroup[]>("GET", "/v1/groups"))?.find((g) => g.name === name);
    if (!group) {
      throw new Error(`the rank group "${name}" is gone; choose another (click it in the status bar)`);
    }
    return group.workers;
  }

  dispose(): void {
    this.item.dispose();
    this.changed.dispose();
  }
}

function describe(g: RankGroup): string {
  const who = g.ranks.length ? `ranks ${formatRanks(g.ranks)}` : `${g.workers.length} worker${g.workers.length === 1 ? "" : "s"}`;
  return [who, g.expression ?? "", g.job_id ? `job ${g.job_id}` : ""].filter(Boolean).join(" · ");
}
