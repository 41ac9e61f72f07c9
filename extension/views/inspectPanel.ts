// raySleuth.showInspectTable: the cross-rank table of what `raysleuth.inspect()`
// recorded (GET /v1/inspect), picked by name and step, rank × statistic with
// the ranks that differ from the majority marked; while it shows a name's
// latest step it follows the `inspect` stream events.
import * as vscode from "vscode";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { getInspect } from "../broker/telemetryClient";
import { InspectQuery } from "../broker/types";
import { tensorPageHtml } from "./tensorHtml";
import { TensorGroup, inspectGroups, inspectNames, newestCompleteStep } from "./tensorTable";

export const INSPECT_VIEW_TYPE = "raySleuth.inspect";

/** The step a table shows: the newest one every rank has sent (followed live), every kept step, or one. */
export const LATEST = "latest";
export const ALL_STEPS = "all";

/** The command's arguments from a test or another command: skips the pickers. */
export interface InspectArgs {
  name: string;
  /** A step as sent ("12"), ALL_STEPS, or LATEST (the default). */
  step?: string;
  rtol?: number;
}

/** Redraws a followed table at most this often while ranks send their rows. */
const FOLLOW_MS = 500;

export class InspectService implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  /** What the table shows now (tests read it). */
  shown: { args: InspectArgs; groups: TensorGroup[] } | undefined;
  private follow: ReturnType<typeof setTimeout> | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly connection: BrokerConnectionService) {
    this.disposables.push(
      connection.onStreamEvent((e) => {
        const args = this.shown?.args;
        const name = (e.data as { name?: unknown } | null)?.name;
        if (e.event === "inspect" && args && (args.step ?? LATEST) === LATEST && this.follow === undefined && (name === args.name || this.shown?.groups.some((g) => g.name === name))) {
          this.follow = setTimeout(() => {
            this.follow = undefined;
            if (this.shown) {
              void this.show(this.shown.args, false);
            }
          }, FOLLOW_MS);
        }
      }),
    );
  }

  /** The command: `args`, else a pick of the names recorded, then of their steps. */
  async command(args?: unknown): Promise<TensorGroup[] | undefined> {
    const a = args as Partial<InspectArgs> | undefined;
    if (a && typeof a.name === "string") {
      return this.show(a as InspectArgs);
    }
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    let names;
    try {
      names = inspectNames(await getInspect(client));
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: reading the inspect table failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
    if (!names.length) {
      void vsapi.showInformationMessage("Ray Sleuth: nothing recorded yet. Call raysleuth.inspect(name, tensor, step) in remote code, or use Compare Across Ranks on a selection.");
      return undefined;
    }
    const name = await vscode.window.showQuickPick(
      names.map((n) => ({
        label: n.name,
        description: `step ${String(n.steps[0])} · ${n.ranks} rank${n.ranks === 1 ? "" : "s"}${n.flagged ? ` · ${n.flagged} differ${n.flagged === 1 ? "s" : ""}` : ""}`,
      })),
      { title: "Ray Sleuth: inspect table of…", placeHolder: "A name recorded by raysleuth.inspect()" },
    );
    if (!name) {
      return undefined;
    }
    let steps: (number | string | null)[] = [];
    try {
      steps = inspectNames(await getInspect(client, { name: name.label, step: ALL_STEPS })).find((n) => n.name === name.label)?.steps ?? [];
    } catch (err) {
      swallow(`Reading the steps of ${name.label}`, err);
    }
    const step = await vscode.window.showQuickPick(
      [
        { label: "Latest step", description: "the newest step every rank has sent, followed live", step: LATEST },
        { label: "Every kept step", description: `${steps.length} step${steps.length === 1 ? "" : "s"}`, step: ALL_STEPS },
        ...steps.map((s) => ({ label: `step ${String(s)}`, description: "", step: String(s) })),
      ],
      { title: `Ray Sleuth: ${name.label} at step…` },
    );
    return step ? this.show({ name: name.label, step: step.step }) : undefined;
  }

  /** Reads and shows the table (`reveal`: brings it to the front); undefined when the broker could not be asked (already told). */
  async show(args: InspectArgs, reveal = true): Promise<TensorGroup[] | undefined> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    const step = args.step ?? LATEST;
    const query: InspectQuery = { name: args.name, step: step === LATEST ? ALL_STEPS : step, ...(args.rtol !== undefined ? { rtol: args.rtol } : {}) };
    let groups: TensorGroup[];
    try {
      const rows = await getInspect(client, query);
      groups = inspectGroups(step === LATEST ? newestCompleteStep(rows) : rows);
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: reading the inspect table of ${args.name} failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
    this.shown = { args, groups };
    const flagged = groups.filter((g) => g.flagged.length).length;
    const meta =
      `${step === LATEST ? "The newest step every rank has sent, followed live" : step === ALL_STEPS ? "Every kept step" : `Step ${step}`} · ` +
      `${groups.length} table${groups.length === 1 ? "" : "s"}${flagged ? ` · ${flagged} with ranks that differ` : " · all ranks agree"} · ` +
      `flagged: a content hash not the majority's, or (ranks holding different data) norm or mean off the median by over rtol=${args.rtol ?? 1e-5}`;
    const title = `Inspect ${args.name}`;
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(INSPECT_VIEW_TYPE, title, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, { enableScripts: false });
      this.panel.onDidDispose(() => {
        this.panel = undefined;
        this.shown = undefined;
      });
    }
    this.panel.title = title;
    if (reveal) {
      this.panel.reveal(undefined, true);
    }
    this.panel.webview.html = tensorPageHtml(title, meta, groups, `No rows of ${args.name}${step === LATEST ? "" : ` at step ${step}`} yet.`);
    log.info(`Inspect table of ${args.name} (${step}): ${groups.length} group(s), ${flagged} flagged`);
    return groups;
  }

  /** The panel's HTML as set (tests read it). */
  get html(): string | undefined {
    return this.panel?.webview.html;
  }

  dispose(): void {
    if (this.follow !== undefined) {
      clearTimeout(this.follow);
    }
    this.panel?.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
