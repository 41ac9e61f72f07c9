// What the editor knows about the cluster now: connection status, workers,
// nodes. The connection service writes it; views only read it and listen.
import * as vscode from "vscode";
import { NodeInfo, WorkerInfo } from "../broker/types";

export type ConnectionStatus = "disconnected" | "connecting" | "connected" | "reconnecting";

export class ClusterState implements vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;

  private _status: ConnectionStatus = "disconnected";
  private _workers: WorkerInfo[] = [];
  private _nodes: NodeInfo[] = [];
  private _brokerUrl: string | undefined;

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

  setStatus(status: ConnectionStatus, brokerUrl?: string): void {
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

  setWorkers(workers: WorkerInfo[]): void {
    this._workers = workers;
    this.changed.fire();
  }

  setNodes(nodes: NodeInfo[]): void {
    this._nodes = nodes;
    this.changed.fire();
  }

  dispose(): void {
    this.changed.dispose();
  }
}
