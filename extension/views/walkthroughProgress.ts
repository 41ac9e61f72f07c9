// Ticks the "Debug a Ray cluster" walkthrough's steps by what the user did, however they did it
// (a click on a Cluster row, a crash notification's Inspect, a scope typed into the condition
// box): package.json's completionEvents wait for these context keys.
import * as vscode from "vscode";
import { DEBUG_TYPE } from "../constants";
import * as vsapi from "../common/vscodeapi";
import { rankScopeOf } from "../breakpoints/rankScope";

export const WalkthroughKeys = {
  attached: "raySleuth.walkthrough.attached",
  rankScoped: "raySleuth.walkthrough.rankScoped",
  crashInspected: "raySleuth.walkthrough.crashInspected",
} as const;

export class WalkthroughProgress implements vscode.Disposable {
  private readonly done = new Set<string>();
  private readonly disposables: vscode.Disposable[];

  constructor() {
    this.disposables = [
      vscode.debug.onDidStartDebugSession((s) => {
        if (s.type !== DEBUG_TYPE || s.configuration.cluster) {
          return;
        }
        this.tick(s.configuration.crash ? WalkthroughKeys.crashInspected : WalkthroughKeys.attached);
      }),
      vscode.debug.onDidChangeBreakpoints((e) => {
        const scoped = [...e.added, ...e.changed].some((b) => b instanceof vscode.SourceBreakpoint && rankScopeOf(b.condition) !== undefined);
        if (scoped) {
          this.tick(WalkthroughKeys.rankScoped);
        }
      }),
    ];
  }

  private tick(key: string): void {
    if (!this.done.has(key)) {
      this.done.add(key);
      void vsapi.setContext(key, true);
    }
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
