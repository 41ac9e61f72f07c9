// What the broker says the cluster breakpoint set is now (scope, armed count per
// breakpoint): fetched on connect, replaced by every `breakpoints` stream event
// and by the answers to the mirror's PUTs. Read by the line decorations.
import * as path from "path";
import * as vscode from "vscode";
import { log } from "../common/log";
import { BrokerClient, BrokerError } from "../broker/brokerClient";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { ClusterBreakpoint } from "../broker/types";
import { ClusterState } from "../cluster/clusterState";

export class ClusterBreakpointStore implements vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private _breakpoints: ClusterBreakpoint[] = [];
  private readonly disposables: vscode.Disposable[] = [this.changed];

  constructor(
    private readonly connection: BrokerConnectionService,
    state: ClusterState,
  ) {
    this.disposables.push(
      state.onDidChange(() => {
        if (state.status === "disconnected" && this._breakpoints.length) {
          this.set([]); // nothing is armed that this window can know of
        }
      }),
      connection.onDidConnect((client) => void this.fetch(client)),
      connection.onStreamEvent((e) => {
        if (e.event === "breakpoints" && Array.isArray(e.data)) {
          this.set(e.data as ClusterBreakpoint[]);
        }
      }),
    );
  }

  toString(): string {
    return `ClusterBreakpoints[${this._breakpoints.length}]`;
  }

  get breakpoints(): readonly ClusterBreakpoint[] {
    return this._breakpoints;
  }

  /** The cluster breakpoints of one local file. */
  forFile(fsPath: string): ClusterBreakpoint[] {
    const want = path.normalize(fsPath);
    return this._breakpoints.filter((b) => path.normalize(b.path) === want);
  }

  set(breakpoints: ClusterBreakpoint[]): void {
    this._breakpoints = breakpoints;
    this.changed.fire();
  }

  /** One file's set as a PUT answered it (the stream event may come later). */
  replaceFile(fsPath: string, breakpoints: ClusterBreakpoint[]): void {
    const want = path.normalize(fsPath);
    this.set([...this._breakpoints.filter((b) => path.normalize(b.path) !== want), ...breakpoints]);
  }

  private async fetch(client: BrokerClient): Promise<void> {
    try {
      const list = await client.getBreakpoints();
      if (client === this.connection.client) {
        this.set(list);
      }
    } catch (err) {
      // A broker without cluster breakpoints (404) is told once by the mirror's PUT.
      const e = err as BrokerError;
      log.warn(`Fetching the cluster breakpoints failed: ${e.message ?? String(err)}`);
    }
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
