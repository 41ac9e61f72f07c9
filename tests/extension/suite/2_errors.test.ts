// What the user is told when the broker cannot be used: a wrong token (401)
// and a broker that is not running. Runs against the demo's real broker.
import * as assert from "assert";
import type { RaySleuthApi } from "../../../extension/extension";
import { BrokerClient, BrokerError } from "../../../extension/broker/brokerClient";
import type { Notifier } from "../../../extension/broker/brokerConnection";
import { freePort } from "../ports";
import { activateExtension, demoBroker, waitFor } from "./helpers";

interface Shown {
  message: string;
  actions: string[];
}

function recordingNotifier(shown: Shown[]): Notifier {
  const record = (message: string, ...actions: string[]) => {
    shown.push({ message, actions });
    return Promise.resolve(undefined);
  };
  return { error: record, info: record };
}

describe("Broker errors", () => {
  let api: RaySleuthApi;
  let shown: Shown[];
  let original: Notifier;

  before(async () => {
    api = await activateExtension();
    original = api.connection.notifier;
  });
  beforeEach(() => {
    shown = [];
    api.connection.notifier = recordingNotifier(shown);
  });
  after(async () => {
    // Leave the extension connected to the demo for whatever runs next.
    const ok = await api.connection.connect({ interactive: false });
    api.connection.notifier = original;
    assert.ok(ok, `reconnects with the right token: ${JSON.stringify(shown)}`);
  });

  it("a wrong token is found out before it is sent, with an error that names the fix", async () => {
    const { url } = demoBroker();
    const err = await new BrokerClient({ url, token: "not-the-token" }).getWorkers().then(
      () => assert.fail("a wrong token was accepted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof BrokerError, String(err));
    assert.strictEqual(err.kind, "unauthorized");
    assert.ok(err.message.startsWith(`The process at ${url} could not prove it holds your token`), err.message);
    assert.ok(err.message.includes("your token is wrong or stale"), err.message);
    assert.ok(err.message.includes("raySleuth.tokenFile"), "says which setting to fix");
  });

  it("connecting with a wrong token tells the user and shows disconnected", async () => {
    const { url } = demoBroker();
    const ok = await api.connection.connectTo({ url, token: "not-the-token", source: "test" }, { interactive: true });
    assert.strictEqual(ok, false);
    assert.strictEqual(shown.length, 1, JSON.stringify(shown));
    assert.match(shown[0].message, /could not prove it holds your token, so the token was not sent to it: your token is wrong/);
    assert.deepStrictEqual(shown[0].actions, ["Open Settings", "Show Log"]);
    assert.strictEqual(api.state.status, "disconnected");
    assert.strictEqual(api.statusBar.text, "Ray: disconnected");
    assert.strictEqual(api.workerTree.getChildren().length, 0);
  });

  it("a broker that is not running gives the connection-refused message with its two actions", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const ok = await api.connection.connectTo({ url, token: "t", source: "test" }, { interactive: true });
    assert.strictEqual(ok, false);
    await waitFor("the notification", () => shown.length === 1);
    assert.deepStrictEqual(shown[0], {
      message: `Cannot reach the broker at ${url} (connection refused). Start it with "raysleuth broker" or set raySleuth.brokerAddress.`,
      actions: ["Start Local Broker", "Open Settings"],
    });
    assert.strictEqual(api.statusBar.text, "Ray: disconnected");
  });
});
