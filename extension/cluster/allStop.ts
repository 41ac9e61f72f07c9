// The broker's all-stop per job (PUT /v1/settings {all_stop}): when one rank of
// a job stops, the broker pauses the job's other ranks. The setting
// raySleuth.allStop, when the user set it, is sent on connect and on change;
// raySleuth.toggleAllStop flips both. The broker's `settings` event keeps the
// context key raySleuth.allStop true to what the broker does.
import * as vscode from "vscode";
import { ContextKeys, SETTINGS_SECTION, Settings } from "../constants";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import type { BrokerConnectionService } from "../broker/brokerConnection";
import { BrokerClient } from "../broker/brokerClient";
import { BrokerSettings } from "../broker/types";

/** The setting's value where the user set it (any scope), else undefined: then the broker's stands. */
function configured(): boolean | undefined {
  const i = vscode.workspace.getConfiguration(SETTINGS_SECTION).inspect<boolean>(Settings.allStop);
  return i?.workspaceFolderValue ?? i?.workspaceValue ?? i?.globalValue;
}

export class AllStopService implements vscode.Disposable {
  /** What the broker does now (undefined before the first answer). */
  value: boolean | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly connection: Pick<BrokerConnectionService, "onDidConnect" | "onStreamEvent" | "ensureClient" | "client">) {
    this.disposables.push(
      connection.onDidConnect((client) => void this.sync(client)),
      connection.onStreamEvent((e) => {
        const data = e.data as Partial<BrokerSettings> | null;
        if (e.event === "settings" && data && typeof data.all_stop === "boolean") {
          this.take(data.all_stop);
        }
      }),
      vsapi.onDidChangeSettings([Settings.allStop], () => {
        const want = configured();
        const client = this.connection.client;
        if (client && want !== undefined && want !== this.value) {
          void this.put(client, want);
        }
      }),
    );
  }

  toString(): string {
    return `AllStop[${this.value === undefined ? "?" : this.value ? "on" : "off"}]`;
  }

  /** raySleuth.toggleAllStop: flips the broker's all-stop and the setting; resolves with the new value. */
  async toggle(): Promise<boolean | undefined> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return undefined;
    }
    const now = this.value ?? (await client.getSettings()).all_stop;
    const next = await this.put(client, !now);
    if (next === undefined) {
      return undefined;
    }
    await vscode.workspace
      .getConfiguration(SETTINGS_SECTION)
      .update(Settings.allStop, next, vscode.ConfigurationTarget.Global)
      .then(undefined, (e: unknown) => swallow("Saving raySleuth.allStop failed", e));
    vsapi.setStatusBarMessage(
      next ? "Ray Sleuth: all-stop on: when one rank of a job stops, its other ranks pause too" : "Ray Sleuth: all-stop off: a rank that stops stops alone",
      8000,
    );
    return next;
  }

  private async sync(client: BrokerClient): Promise<void> {
    try {
      const want = configured();
      const has = (await client.getSettings()).all_stop;
      this.take(has);
      if (want !== undefined && want !== has) {
        await this.put(client, want);
      }
    } catch (err) {
      swallow("Reading the broker's settings failed (an older broker has none)", err);
    }
  }

  private async put(client: BrokerClient, on: boolean): Promise<boolean | undefined> {
    try {
      const reply = await client.putSettings({ all_stop: on });
      this.take(reply.all_stop);
      log.info(`All-stop per job is ${reply.all_stop ? "on" : "off"} at the broker`);
      return reply.all_stop;
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: setting all-stop ${on ? "on" : "off"} failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
  }

  private take(on: boolean): void {
    this.value = on;
    void vsapi.setContext(ContextKeys.allStop, on);
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
