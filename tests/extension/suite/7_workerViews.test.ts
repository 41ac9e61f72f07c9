// Issue #13 in a real VS Code, against the demo's broker: a worker's stdout and
// stderr open from the Cluster view's commands and follow live; the all-stop
// toggle reaches the broker; the Cluster view stops claiming running workers
// while the broker cannot be reached.
import * as assert from "assert";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import { Commands, SETTINGS_SECTION, Settings } from "../../../extension/constants";
import type { StatusChange } from "../../../extension/broker/brokerConnection";
import { NodeInfo, WorkerInfo } from "../../../extension/broker/types";
import { ClusterState } from "../../../extension/cluster/clusterState";
import { ClusterTreeNode, WorkerTreeProvider } from "../../../extension/cluster/workerTreeProvider";
import { connectedExtension, startFixture, waitFor } from "./helpers";

describe("Worker logs, all-stop and stale states (issue #13)", function () {
  let api: RaySleuthApi;

  before(async () => {
    api = await connectedExtension();
  });

  it("Show Worker Output opens the worker's stdout and follows it live; Show Worker Errors its stderr", async function () {
    this.timeout(120_000);
    const driver = startFixture("log_driver.py");
    try {
      const pid = Number((await driver.match("the driver's actor", /pid (\d+)/))[1]);
      // A prestarted worker's agent registers before Ray hands it the actor; its class follows with a heartbeat.
      const worker = await waitFor("the Speaker actor in the Cluster view", () => api.state.workers.find((w) => w.pid === pid && w.state !== "exited" && w.actor_class === "Speaker"), 30_000);
      // As the context menu calls it: with the tree element.
      const element: ClusterTreeNode = { kind: "worker", worker };
      const doc = await vscode.commands.executeCommand<vscode.TextDocument | undefined>(Commands.showWorkerOutput, element);
      assert.ok(doc, "a document opened");
      assert.strictEqual(doc.uri.scheme, "raysleuth-log");
      assert.ok(doc.isClosed === false);
      assert.match(doc.getText(), /^# Speaker · pid \d+ \(stdout\) · .*worker-.*\.out · following live\n/);
      assert.match(doc.getText(), /log-driver out 1\n/);
      assert.doesNotMatch(doc.getText(), /log-driver err 1/);
      // The worker writes again: the open document follows.
      driver.child.stdin?.write("say 2\n");
      await waitFor("line 2 in the open document", () => doc.getText().includes("log-driver out 2\n"), 15_000);
      const err = await vscode.commands.executeCommand<vscode.TextDocument | undefined>(Commands.showWorkerErrors, worker.id);
      assert.ok(err);
      assert.match(err.getText(), /log-driver err 1\n(.|\n)*log-driver err 2\n/);
    } finally {
      await vscode.commands.executeCommand("workbench.action.closeAllEditors");
      await driver.stop(10_000);
    }
  });

  it("the all-stop toggle turns the broker's all_stop on and off, and the setting with it", async function () {
    this.timeout(60_000);
    const client = api.brokerClient;
    assert.ok(client);
    const before = (await client.getSettings()).all_stop;
    try {
      const on = await vscode.commands.executeCommand<boolean | undefined>(Commands.toggleAllStop);
      assert.strictEqual(on, !before);
      assert.strictEqual((await client.getSettings()).all_stop, !before, "the broker's setting");
      assert.strictEqual(vscode.workspace.getConfiguration(SETTINGS_SECTION).get<boolean>(Settings.allStop), !before, "raySleuth.allStop");
      const off = await vscode.commands.executeCommand<boolean | undefined>(Commands.toggleAllStop);
      assert.strictEqual(off, before);
      assert.strictEqual((await client.getSettings()).all_stop, before);
      await waitFor("the settings event", () => api.allStop.value === before, 10_000);
    } finally {
      await vscode.workspace.getConfiguration(SETTINGS_SECTION).update(Settings.allStop, undefined, vscode.ConfigurationTarget.Global);
      await client.putSettings({ all_stop: before });
    }
  });

  it("shows workers as unknown, not running or idle, while the broker cannot be reached", () => {
    const status = new vscode.EventEmitter<StatusChange>();
    const workers = new vscode.EventEmitter<WorkerInfo[]>();
    const nodes = new vscode.EventEmitter<NodeInfo[]>();
    const state = new ClusterState({ onDidChangeStatus: status.event, onDidReceiveWorkers: workers.event, onDidReceiveNodes: nodes.event });
    const tree = new WorkerTreeProvider(state);
    try {
      const live = api.state.workers.filter((w) => w.state === "running" || w.state === "idle");
      assert.ok(live.length > 0, "the demo has running workers");
      status.fire({ status: "connected", url: "http://127.0.0.1:1" });
      workers.fire([...live]);
      const items = () => {
        const out: vscode.TreeItem[] = [];
        const walk = (e?: ClusterTreeNode) => {
          for (const c of tree.getChildren(e)) {
            if (c.kind === "worker") {
              out.push(tree.getTreeItem(c));
            }
            walk(c);
          }
        };
        walk();
        return out;
      };
      assert.ok(items().every((i) => /^worker\.(running|idle)$/.test(i.contextValue ?? "")));
      status.fire({ status: "reconnecting", url: undefined }); // the broker went away
      const stale = items();
      assert.strictEqual(stale.length, live.length, "the workers stay listed");
      for (const i of stale) {
        assert.strictEqual(i.contextValue, "worker.unknown");
        assert.match(String(i.description), /^unknown: broker unreachable \(was (running|idle)\)/);
        assert.strictEqual(i.command, undefined, "no click-to-attach on a worker in an unknown state");
      }
      status.fire({ status: "connected", url: undefined }); // back
      assert.ok(items().every((i) => /^worker\.(running|idle)$/.test(i.contextValue ?? "")));
    } finally {
      tree.dispose();
      state.dispose();
      status.dispose();
      workers.dispose();
      nodes.dispose();
    }
  });
});
