// Against the real broker of `raysleuth demo` (a local Ray cluster with four
// ranked Trainer actors): the Cluster view and the status bar show them.
import * as assert from "assert";
import type { RaySleuthApi } from "../../../extension/extension";
import { BrokerClient } from "../../../extension/broker/brokerClient";
import { WorkerInfo } from "../../../extension/broker/types";
import { activateExtension, demoBroker, demoClient, renderTree, startFixture, waitFor } from "./helpers";

describe("Cluster view against the demo's real broker", () => {
  let api: RaySleuthApi;
  let truth: BrokerClient;

  before(async () => {
    api = await activateExtension();
    truth = demoClient();
  });
  after(() => truth?.dispose());

  it("connects on activation from broker.json in raySleuth.stateDir", async () => {
    await waitFor("the connection", () => api.state.status === "connected", 30_000);
    assert.strictEqual(api.brokerClient?.url, demoBroker().url);
    await waitFor("the event stream to open", () => api.brokerClient?.streamState === "open", 15_000);
  });

  it("shows the four ranked Trainer workers with their ranks and pids", async () => {
    const fromBroker = await truth.getWorkers();
    const trainers = fromBroker.filter((w) => w.actor_class === "Trainer" && w.rank !== null && w.state !== "exited");
    assert.deepStrictEqual(
      trainers.map((w) => w.rank).sort(),
      [0, 1, 2, 3],
      `broker lists ranks ${JSON.stringify(trainers.map((w) => w.rank))}`,
    );
    const expected = [...trainers].sort((a, b) => (a.rank ?? 0) - (b.rank ?? 0)).map((w) => `rank ${w.rank} · Trainer · pid ${w.pid}`);

    const items = await waitFor("four Trainer workers in the tree", () => {
      const workers = renderTree(api).filter((i) => i.kind === "worker" && i.label.includes("· Trainer ·"));
      return workers.length >= 4 && workers;
    });
    assert.deepStrictEqual(items.map((i) => i.label), expected);

    const tree = renderTree(api);
    const node = tree.find((i) => i.kind === "node");
    assert.ok(node && /^node 127\.0\.0\.1 \(/.test(node.label), `node item: ${JSON.stringify(node)}`);
    const group = tree.find((i) => i.kind === "group" && i.label === "Trainer");
    assert.ok(group, "a Trainer group under the node");
    for (const item of items) {
      assert.strictEqual(item.depth, 2, "workers sit under node → actor class");
      assert.match(item.contextValue, /^worker\.(running|idle|paused|crashed|exited)$/);
      assert.ok(item.description.startsWith(item.contextValue.slice("worker.".length).replace("paused", "paused at")), `${item.label}: ${item.description}`);
      assert.ok(item.icon, "a ThemeIcon per state");
      assert.match(item.tooltip, /^worker: [0-9a-f]+$/m);
      assert.match(item.tooltip, /^world size: 4$/m);
    }
  });

  it('says "Ray: N workers" in the status bar, N being the broker\'s count of live workers', async () => {
    let last: { text: string; n: number } | undefined;
    await waitFor(
      "the status bar to match the broker's worker count",
      async () => {
        const n = (await truth.getWorkers()).filter((w) => w.state !== "exited").length;
        last = { text: api.statusBar.text, n };
        return n >= 4 && api.statusBar.text === `Ray: ${n} workers`;
      },
      20_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last seen ${JSON.stringify(last)}`);
    });
  });

  it("follows the broker's event stream", async () => {
    const client = api.brokerClient;
    assert.ok(client, "connected");
    const pushed = await new Promise<WorkerInfo[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no `workers` event within 20 s")), 20_000);
      const sub = client.onWorkers((workers) => {
        clearTimeout(timer);
        sub.dispose();
        resolve(workers);
      });
      // The broker pushes on every change; a refresh is not needed, but asking
      // for one makes sure something happens even on a quiet cluster.
      void truth.getWorkers();
    });
    const ranks = pushed.filter((w) => w.actor_class === "Trainer").map((w) => w.rank).sort();
    assert.deepStrictEqual(ranks, [0, 1, 2, 3], "the pushed list is the full worker list");
  });

  it("shows a worker's GPU memory on its row and in its tooltip, with an arrow while it only grows", async function () {
    this.timeout(120_000);
    // A real actor whose NVML is the fake (this machine has no GPU): 3 GiB, then 512 MiB more per line.
    const job = startFixture("gpu_driver.py");
    try {
      const m = await job.match("the GPU job's actor", /pid (\d+)/);
      const row = (text: RegExp) =>
        waitFor(`rank 9's row to say ${text}`, () => renderTree(api).find((i) => i.kind === "worker" && i.label === `rank 9 · GpuUser · pid ${m[1]}` && text.test(i.description)), 30_000);
      const first = await row(/ · GPU 3\.0 GiB$/);
      assert.match(first.tooltip, /^GPU memory: 3\.0 GiB \(peak 3\.0 GiB\)$/m);
      for (let i = 1; i <= 5; i++) {
        job.child.stdin?.write("\n");
        await waitFor(`step ${i}`, () => job.out().split("\n").filter((l) => l.startsWith("used ")).length >= i, 30_000);
      }
      const grown = await row(/ · GPU 5\.5 GiB ↑$/);
      assert.match(grown.tooltip, /^GPU memory: 5\.5 GiB \(peak 5\.5 GiB, growing\)$/m);
    } finally {
      await job.stop();
    }
  });
});
