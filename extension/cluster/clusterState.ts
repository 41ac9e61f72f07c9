// What the editor knows about the cluster now: connection status, workers,
// nodes. It listens to the broker connection; views only read it and listen.
// It never asks the broker anything itself.
import * as vscode from "vscode";
import type { BrokerConnectionService, ConnectionStatus } from "../broker/brokerConnection";
import { NodeInfo, WorkerInfo } from "../broker/types";

export type { ConnectionStatus };

/** The parts of the connection the state listens to. */
export type ClusterFeed = Pick<BrokerConnectionService, "onDidChangeStatus" | "onDidReceiveWorkers" | "onDidReceiveNodes">;

export class ClusterState implements vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [this.changed];

  private _status: ConnectionStatus = "disconnected";
  private _workers: WorkerInfo[] = [];
  private _lostSince: number | undefined;
  private _nodes: NodeInfo[] = [];
  private _brokerUrl: string | undefined;

  constructor(feed: ClusterFeed) {
    this.disposables.push(
      feed.onDidChangeStatus(({ status, url }) => this.setStatus(status, url)),
      feed.onDidReceiveWorkers((workers) => this.setWorkers(workers)),
      feed.onDidReceiveNodes((nodes) => this.setNodes(nodes)),
    );
  }

  get status(): ConnectionStatus {
    return this._status;
  }
  get workers(): readonly WorkerInfo[] {
    return this._workers;
  }
  get nodes(): readonly NodeInfo[] {
    return this._nodes;
  }
  get brokerUrl(): string | undefined {
    return this._brokerUrl;
  }

  /** When the broker stopped answering (ms since the epoch), while reconnecting. */
  get lostSince(): number | undefined {
    return this._lostSince;
  }

  private setStatus(status: ConnectionStatus, brokerUrl: string | undefined): void {
    if (status === "reconnecting" && this._status !== "reconnecting") {
      this._lostSince = Date.now();
    } else if (status !== "reconnecting") {
      this._lostSince = undefined;
    }
    this._status = status;
    if (brokerUrl !== undefined) {
      this._brokerUrl = brokerUrl;
    }
    if (status === "disconnected") {
      this._workers = [];
      this._nodes = [];
    }
    this.changed.fire();
  }

  private setWorkers(workers: WorkerInfo[]): void {
    this._workers = workers;
    this.changed.fire();
  }

  private setNodes(nodes: NodeInfo[]): void {
    this._nodes = nodes;
    this.changed.fire();
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
