// The broker client (fetch + eventsource-parser) against a small local HTTP
// server that plays the broker: requests, the errors a user is told, and the
// event stream with its reconnects. Plain mocha under Node, no Ray, no window.
import * as assert from "assert";
import { createHmac } from "crypto";
import * as http from "http";
import * as net from "net";
import { BrokerClient, BrokerError, readEventStream, stacksQueryString, StreamState } from "../../../extension/broker/brokerClient";
import { StreamEvent, WorkerInfo } from "../../../extension/broker/types";

const TOKEN = "s3cret";

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

/** A local HTTP server whose routes a test sets; every request is recorded. */
class FakeBroker {
  readonly server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => {
      const hello = /^\/v1\/hello\?nonce=([0-9a-f]+)$/.exec(req.url ?? "");
      if (req.method === "GET" && hello) {
        // The broker proves it holds its token (an impostor does not know it).
        this.hellos.push(req.headers);
        const proof = createHmac("sha256", this.token).update(`raysleuth-broker-proof:${hello[1]}`).digest("hex");
        res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ broker: "raysleuth", proof }));
        return;
      }
      this.requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      const route = this.routes.get(`${req.method} ${req.url}`);
      if (!route) {
        res.writeHead(404, { "Content-Type": "application/json" }).end(JSON.stringify({ error: `no route ${req.method} ${req.url}` }));
        return;
      }
      route(req, res, body);
    });
  });
  readonly routes = new Map<string, Handler>();
  readonly requests: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
  readonly hellos: http.IncomingHttpHeaders[] = [];
  url = "";

  /** The token this broker holds: another than the client's makes it an impostor. */
  constructor(readonly token = TOKEN) {}

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function json(status: number, value: unknown): Handler {
  return (_req, res) => res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(value));
}

async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v) {
      return v;
    }
    if (Date.now() > deadline) {
      throw new Error(`Timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function rejection(p: Promise<unknown>): Promise<BrokerError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof BrokerError, `a BrokerError, not ${String(err)}`);
    return err;
  }
  throw new Error("expected a rejection");
}

async function* chunks(parts: (string | Uint8Array)[]): AsyncIterable<Uint8Array> {
  for (const p of parts) {
    yield typeof p === "string" ? new TextEncoder().encode(p) : p;
  }
}

describe("Event stream parsing (eventsource-parser)", () => {
  it("joins chunks split anywhere, CRLF or LF, multi-line data, skips comments", async () => {
    const got: [string, string][] = [];
    const text = ': keep-alive\r\nevent: workers\r\ndata: [1,\r\ndata: 2]\r\n\r\nevent: crash\ndata: {"id":"x"}\n\ndata: plain\n\n';
    await readEventStream(chunks([...text]), (e, d) => got.push([e, d]));
    assert.deepStrictEqual(got, [
      ["workers", "[1,\n2]"],
      ["crash", '{"id":"x"}'],
      ["message", "plain"],
    ]);
  });

  it("keeps a character whose UTF-8 bytes come in two chunks", async () => {
    const bytes = new TextEncoder().encode('event: log\ndata: {"message":"loss ↓"}\n\n');
    const cut = bytes.indexOf(0xe2) + 1; // inside the three bytes of the arrow
    const got: string[] = [];
    await readEventStream(chunks([bytes.slice(0, cut), bytes.slice(cut)]), (_e, d) => got.push(d));
    assert.deepStrictEqual(got, ['{"message":"loss ↓"}']);
  });
});

describe("Broker client against a local fake broker", () => {
  let broker: FakeBroker;
  let client: BrokerClient | undefined;

  beforeEach(async () => {
    broker = new FakeBroker();
    await broker.start();
  });

  afterEach(async () => {
    client?.dispose();
    client = undefined;
    await broker.stop();
  });

  function connect(options: Partial<ConstructorParameters<typeof BrokerClient>[0]> = {}): BrokerClient {
    client = new BrokerClient({ url: `${broker.url}/`, token: TOKEN, minBackoffMs: 20, maxBackoffMs: 50, ...options });
    return client;
  }

  it("sends the bearer token and who it is, and parses the JSON answer", async () => {
    broker.routes.set("GET /v1/workers", json(200, [{ id: "w1" }]));
    const workers = await connect().getWorkers();
    assert.deepStrictEqual(workers, [{ id: "w1" }]);
    const req = broker.requests[0];
    assert.strictEqual(req.headers.authorization, `Bearer ${TOKEN}`);
    assert.match(String(req.headers["user-agent"]), /^raysleuth-vscode \(pid \d+\)$/);
  });

  it("sends the token only after the broker proved it holds it, once per connection", async () => {
    broker.routes.set("GET /v1/workers", json(200, []));
    const c = connect();
    await c.getWorkers();
    await c.getWorkers();
    assert.strictEqual(broker.hellos.length, 1);
    assert.strictEqual(broker.hellos[0].authorization, undefined);
  });

  it("never sends the token to a process that took a dead broker's port", async () => {
    const impostor = new FakeBroker("not-the-token");
    await impostor.start();
    try {
      impostor.routes.set("GET /v1/workers", json(200, []));
      const c = new BrokerClient({ url: impostor.url, token: TOKEN });
      const err = await rejection(c.getWorkers());
      assert.strictEqual(err.kind, "unauthorized");
      assert.match(err.message, /could not prove it holds your token, so the token was not sent to it: your token is wrong or stale/);
      assert.deepStrictEqual(impostor.requests, []);
      c.startStream();
      await until("the stream gives up", () => c.streamState === "closed" && impostor.hellos.length >= 2);
      assert.deepStrictEqual(impostor.requests, []);
      assert.ok(impostor.hellos.every((h) => h.authorization === undefined));
      c.dispose();
    } finally {
      await impostor.stop();
    }
  });

  it("PUTs a file's breakpoints with the owner as JSON", async () => {
    broker.routes.set("PUT /v1/breakpoints", (_req, res, body) => json(200, { path: "/a.py", owner: JSON.parse(body).owner, breakpoints: [] })(_req, res, body));
    const reply = await connect().putBreakpoints({ path: "/a.py", owner: "vscode:x", breakpoints: [{ line: 3, condition: "[rank 1]" }] });
    assert.strictEqual(reply.owner, "vscode:x");
    assert.deepStrictEqual(JSON.parse(broker.requests[0].body), { path: "/a.py", owner: "vscode:x", breakpoints: [{ line: 3, condition: "[rank 1]" }] });
    assert.strictEqual(broker.requests[0].headers["content-type"], "application/json");
  });

  it("asks GET /v1/stacks with the selection in the query, and PUTs / DELETEs the hang watch", async () => {
    const result = { time: 1, elapsed_ms: 2, workers: [], groups: [], collectives: [], behind: [], text: "" };
    broker.routes.set("GET /v1/stacks?job=02000000&ranks=0-2%2C5&native=1&timeout=3", json(200, result));
    broker.routes.set("GET /v1/stacks", json(200, result));
    broker.routes.set("PUT /v1/stacks/watch", (req, res, body) => json(200, { on: true, ...JSON.parse(body), cost_ms: null })(req, res, body));
    broker.routes.set("DELETE /v1/stacks/watch", json(200, { on: false }));
    const c = connect();
    assert.deepStrictEqual(await c.getStacks({ job: "02000000", ranks: [5, 2, 0, 1], native: true, timeout: 3 }), result);
    assert.deepStrictEqual(await c.getStacks(), result);
    const watch = await c.setStacksWatch({ interval: 10, samples: 3 });
    assert.deepStrictEqual(watch, { on: true, interval: 10, samples: 3, cost_ms: null });
    await c.deleteStacksWatch();
    assert.deepStrictEqual(
      broker.requests.map((r) => `${r.method} ${r.url}`),
      ["GET /v1/stacks?job=02000000&ranks=0-2%2C5&native=1&timeout=3", "GET /v1/stacks", "PUT /v1/stacks/watch", "DELETE /v1/stacks/watch"],
    );
    assert.strictEqual(stacksQueryString({ workers: ["a1", "b2"], ranks: [] }), "?workers=a1%2Cb2");
  });

  it("turns a 401 into an unauthorized error that says where the token comes from", async () => {
    broker.routes.set("GET /v1/workers", json(401, { error: "bad token", hint: "read the token file" }));
    const err = await rejection(connect().getWorkers());
    assert.strictEqual(err.kind, "unauthorized");
    assert.strictEqual(err.status, 401);
    assert.strictEqual(err.hint, "read the token file");
    assert.match(err.message, /rejected the token \(401 Unauthorized\): bad token read the token file Check raySleuth\.tokenFile or RAYSLEUTH_TOKEN/);
  });

  it("keeps the broker's error and hint of a 400 apart for the caller", async () => {
    broker.routes.set("PUT /v1/breakpoints", json(400, { error: "condition is not Python", hint: "fix line 3" }));
    const err = await rejection(connect().putBreakpoints({ path: "/a.py", breakpoints: [] }));
    assert.strictEqual(err.kind, "http");
    assert.strictEqual(err.brokerError, "condition is not Python");
    assert.strictEqual(err.hint, "fix line 3");
    assert.match(err.message, /^Broker PUT \/v1\/breakpoints at http:\/\/127\.0\.0\.1:\d+ failed \(400\): condition is not Python fix line 3$/);
  });

  it("says when a reply is not JSON", async () => {
    broker.routes.set("GET /v1/nodes", (_req, res) => res.writeHead(200).end("<html>"));
    const err = await rejection(connect().getNodes());
    assert.strictEqual(err.kind, "protocol");
    assert.match(err.message, /reply to GET \/v1\/nodes that is not JSON: <html>/);
  });

  it("says how to start a broker when nothing listens", async () => {
    const url = broker.url;
    await broker.stop();
    broker = new FakeBroker();
    await broker.start(); // for afterEach
    const err = await rejection(new BrokerClient({ url, token: TOKEN }).getWorkers());
    assert.strictEqual(err.kind, "refused");
    assert.strictEqual(err.message, `Cannot reach the broker at ${url} (connection refused). Start it with "raysleuth broker" or set raySleuth.brokerAddress.`);
  });

  it("gives up on a broker that does not answer within the timeout", async () => {
    broker.routes.set("GET /v1/status", () => undefined); // never answers
    const err = await rejection(connect({ timeoutMs: 200 }).getStatus());
    assert.strictEqual(err.kind, "timeout");
    assert.match(err.message, /did not answer GET \/v1\/status within 0\.2 s/);
  });

  it("names a bad address", async () => {
    const err = await rejection(new BrokerClient({ url: "not a url", token: TOKEN }).getWorkers());
    assert.strictEqual(err.kind, "protocol");
    assert.match(err.message, /^Invalid broker address not a url: .*Check raySleuth\.brokerAddress\.$/);
  });

  it("streams events, typed worker lists among them, and reconnects when the broker closes the stream", async () => {
    let opened = 0;
    broker.routes.set("GET /v1/stream", (_req, res) => {
      opened++;
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(": keepalive\n\n");
      res.write(`event: workers\ndata: [{"id":"w${opened}"}]\n\n`);
      res.write('event: log\ndata: {"message":"hi"}\n\n');
      if (opened === 1) {
        res.end(); // the broker goes away once
      }
    });
    const c = connect();
    const workers: WorkerInfo[][] = [];
    const events: StreamEvent[] = [];
    const states: StreamState[] = [];
    const errors: BrokerError[] = [];
    c.onWorkers((w) => workers.push(w));
    c.onStreamEvent((e) => events.push(e));
    c.onStreamState((s) => states.push(s));
    c.onStreamError((e) => errors.push(e));
    c.startStream();
    await until("two connections' worker lists", () => workers.length >= 2);
    assert.deepStrictEqual(workers.map((w) => w[0].id), ["w1", "w2"]);
    assert.deepStrictEqual(events.slice(0, 2), [
      { event: "workers", data: [{ id: "w1" }] },
      { event: "log", data: { message: "hi" } },
    ]);
    assert.strictEqual(errors[0]?.kind, "network", "the close is reported");
    assert.deepStrictEqual(states.slice(0, 4), ["connecting", "open", "connecting", "open"]);
    assert.strictEqual(broker.requests.find((r) => r.url === "/v1/stream")?.headers.accept, "text/event-stream");
    c.stopStream();
    assert.strictEqual(c.streamState, "closed");
  });

  it("sees a broker that was down for seconds within about a second of its return (default backoff)", async function () {
    this.timeout(20_000);
    broker.routes.set("GET /v1/stream", (_req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(`event: workers\ndata: []\n\n`);
    });
    const port = Number(new URL(broker.url).port);
    const c = new BrokerClient({ url: broker.url, token: TOKEN });
    client = c;
    const states: [StreamState, number][] = [];
    c.onStreamState((s) => states.push([s, Date.now()]));
    c.startStream();
    await until("the stream", () => c.streamState === "open");
    await broker.stop(); // the broker stops ...
    await new Promise((r) => setTimeout(r, 6000)); // ... for 6 s: the backoff grows meanwhile
    await new Promise<void>((resolve) => broker.server.listen(port, "127.0.0.1", resolve)); // and comes back
    const back = Date.now();
    await until("the stream again", () => c.streamState === "open", 10_000);
    const took = Date.now() - back;
    assert.ok(took <= 1250, `reconnected ${took} ms after the broker came back`);
  });

  it("reads a worker's log range and the broker's settings", async () => {
    const chunk = { worker: "w1", stream: "err", path: "/tmp/ray/worker-w1.err", offset: 10, next_offset: 16, size: 16, data: "boom!\n" };
    broker.routes.set("GET /v1/workers/w1/logs?stream=err&offset=10&max=4096", json(200, chunk));
    broker.routes.set("GET /v1/settings", json(200, { all_stop: false }));
    broker.routes.set("PUT /v1/settings", (_req, res, body) => json(200, JSON.parse(body))(_req, res, body));
    const c = connect();
    assert.deepStrictEqual(await c.getWorkerLogs("w1", "err", 10, 4096), chunk);
    assert.deepStrictEqual(await c.getSettings(), { all_stop: false });
    assert.deepStrictEqual(await c.putSettings({ all_stop: true }), { all_stop: true });
    assert.strictEqual(broker.requests.at(-1)?.body, '{"all_stop":true}');
  });

  it("stops reconnecting after a 401 on the stream", async () => {
    broker.routes.set("GET /v1/stream", json(401, { error: "bad token" }));
    const c = connect();
    const errors: BrokerError[] = [];
    c.onStreamError((e) => errors.push(e));
    c.startStream();
    await until("the 401", () => errors.length > 0);
    await new Promise((r) => setTimeout(r, 150)); // several backoffs' worth
    assert.strictEqual(errors.length, 1);
    assert.strictEqual(errors[0].kind, "unauthorized");
    assert.strictEqual(c.streamState, "closed");
    assert.strictEqual(broker.requests.filter((r) => r.url === "/v1/stream").length, 1);
  });

  it("reports event data that is not JSON, and goes on", async () => {
    broker.routes.set("GET /v1/stream", (_req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write("event: crash\ndata: {oops\n\nevent: crash\ndata: {}\n\n");
    });
    const c = connect();
    const errors: BrokerError[] = [];
    const events: StreamEvent[] = [];
    c.onStreamError((e) => errors.push(e));
    c.onStreamEvent((e) => events.push(e));
    c.startStream();
    await until("the good event", () => events.length > 0);
    assert.strictEqual(errors[0]?.kind, "protocol");
    assert.match(errors[0].message, /"crash" event whose data is not JSON: \{oops/);
  });
});
