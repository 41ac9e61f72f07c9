// Where a "raysleuth" session's DAP goes: worker sessions to the broker's DAP front door (the
// address the configuration provider put in the config) through an in-process pipe that checks
// the port's peer and carries a single-use attach ticket, never the token (brokerDapAdapter.ts);
// the "Ray cluster" parent session to an in-process adapter. Never starts a process.
import * as vscode from "vscode";
import type { BrokerAccess } from "../broker/brokerConnection";
import { createTicket, ticketTarget, withTicket } from "../broker/tickets";
import { SleuthAttachConfig, parseDapAddress } from "./attachConfig";
import { BrokerDapAdapter } from "./brokerDapAdapter";
import { ClusterSessionAdapter } from "./clusterSessionAdapter";

export class SleuthDebugAdapterFactory implements vscode.DebugAdapterDescriptorFactory {
  constructor(
    /** Makes the parent session's adapter (the worker sessions' service keeps it up to date). */
    private readonly clusterAdapter: () => ClusterSessionAdapter = () => new ClusterSessionAdapter(),
    /** The broker that issues the attach tickets. */
    private readonly broker?: BrokerAccess,
  ) {}

  createDebugAdapterDescriptor(session: vscode.DebugSession): vscode.DebugAdapterDescriptor {
    const config = session.configuration as SleuthAttachConfig;
    if (config.cluster) {
      return new vscode.DebugAdapterInlineImplementation(this.clusterAdapter());
    }
    if (typeof config.__raySleuthDap !== "string" || !this.broker) {
      throw new Error("Ray Sleuth: this session has no broker DAP address. Connect to the broker (Ray Sleuth: Connect to Broker) and start it again.");
    }
    const { host, port } = parseDapAddress(config.__raySleuthDap);
    const broker = this.broker;
    const adapter = new BrokerDapAdapter(host, port, async (args) => {
      if (typeof args.ticket === "string" && args.ticket) {
        return withTicket(args, args.ticket); // the configuration's own ticket (`raysleuth ticket`)
      }
      const client = await broker.ensureClient();
      if (!client) {
        throw new Error("not connected to a broker");
      }
      return withTicket(args, await createTicket(client, ticketTarget(args)));
    });
    return new vscode.DebugAdapterInlineImplementation(adapter);
  }
}
