// What the broker says the cluster breakpoint set is now, every owner's (scope,
// armed count and owner per breakpoint): fetched on connect, replaced by every
// `breakpoints` stream event and by the answers to the mirror's PUTs. Read by
// the line decorations. Never sends anything.
import * as path from "path";
import * as vscode from "vscode";
import { log } from "../common/log";
import { BrokerClient } from "../broker/brokerClient";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { ClusterBreakpoint } from "../broker/types";
import { isOwnedBy } from "./annotations";

export class ClusterBreakpointStore implements vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private _breakpoints: ClusterBreakpoint[] = [];
  private readonly disposables: vscode.Disposable[] = [this.changed];

  constructor(private readonly connection: BrokerConnectionService) {
    this.disposables.push(
      connection.onDidChangeStatus(({ status }) => {
        if (status === "disconnected" && this._breakpoints.length) {
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

  /** One owner's points in one file as a PUT answered them (the stream event may come later); other owners' stay. */
  replaceOwned(fsPath: string, owner: string, breakpoints: ClusterBreakpoint[]): void {
    const want = path.normalize(fsPath);
    this.set([...this._breakpoints.filter((b) => path.normalize(b.path) !== want || !isOwnedBy(b, owner)), ...breakpoints]);
  }

  private async fetch(client: BrokerClient): Promise<void> {
    try {
      const list = await client.getBreakpoints();
      if (client === this.connection.client) {
        this.set(list);
      }
    } catch (err) {
      // A broker without cluster breakpoints (404) is told once by the mirror's PUT.
      log.warn(`Fetching the cluster breakpoints failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
