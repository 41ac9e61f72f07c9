// Where a "raysleuth" session's DAP goes: worker sessions to the broker's DAP
// front door (the address the configuration provider put in the config), the
// "Ray cluster" parent session to an in-process adapter. Never starts a process.
import * as vscode from "vscode";
import { SleuthAttachConfig, parseDapAddress } from "./attachConfig";
import { ClusterSessionAdapter } from "./clusterSessionAdapter";

export class SleuthDebugAdapterFactory implements vscode.DebugAdapterDescriptorFactory {
  constructor(
    /** Makes the parent session's adapter (the worker sessions' service keeps it up to date). */
    private readonly clusterAdapter: () => ClusterSessionAdapter = () => new ClusterSessionAdapter(),
  ) {}

  createDebugAdapterDescriptor(session: vscode.DebugSession): vscode.DebugAdapterDescriptor {
    const config = session.configuration as SleuthAttachConfig;
    if (config.cluster) {
      return new vscode.DebugAdapterInlineImplementation(this.clusterAdapter());
    }
    if (typeof config.__raySleuthDap !== "string") {
      throw new Error("Ray Sleuth: this session has no broker DAP address. Connect to the broker (Ray Sleuth: Connect to Broker) and start it again.");
    }
    const { host, port } = parseDapAddress(config.__raySleuthDap);
    return new vscode.DebugAdapterServer(port, host);
  }
}
