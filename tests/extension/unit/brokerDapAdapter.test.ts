// Issue #37, finding 1, the DAP path the extension builds: a worker session's adapter connects to
// the broker's DAP port itself, checks that the port's peer is ours before a byte goes out, and
// sends a fresh single-use attach ticket (POST /v1/tickets) in `attach`, never the token. Real
// sockets: a DAP server of ours, a listener run as nobody on "the DAP port", and a fake broker
// for the tickets (the wire contract of python_backend/raysleuth/broker/tickets.py). Plain mocha.
import * as assert from "assert";
import { createHmac } from "crypto";
import * as http from "http";
import * as net from "net";
import { BrokerClient } from "../../../extension/broker/brokerClient";
import { createTicket, ticketTarget, withTicket } from "../../../extension/broker/tickets";
import { BrokerDapAdapter, DapMessage, frame, unframe } from "../../../extension/debug/brokerDapAdapter";
import { NobodyListener, needNobody } from "./nobodyListener";

const TOKEN = "t0ken-of-the-test-broker-0123456789abcdef";
const TICKET = "ab".repeat(32);

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

/** A DAP front door of ours: answers every request with success; records what it got. */
class FakeDapServer {
  readonly got: DapMessage[] = [];
  port = 0;
  private readonly server = net.createServer((c) => {
    let pending: Buffer = Buffer.alloc(0);
    c.on("data", (chunk: Buffer) => {
      const { messages, rest } = unframe(Buffer.concat([pending, chunk]));
      pending = rest;
      for (const m of messages) {
        this.got.push(m);
        c.write(frame({ seq: this.got.length, type: "response", request_seq: m.seq, command: m.command, success: true }));
        if (m.command === "attach") {
          c.write(frame({ seq: 0, type: "event", event: "initialized" }));
        }
      }
    });
  });

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async stop(): Promise<void> {
    await new Promise((r) => this.server.close(r));
  }
}

function collect(adapter: BrokerDapAdapter): DapMessage[] {
  const out: DapMessage[] = [];
  adapter.onDidSendMessage((m) => out.push(m));
  return out;
}

const initialize: DapMessage = { seq: 1, type: "request", command: "initialize", arguments: { adapterID: "raysleuth" } };
const attach: DapMessage = { seq: 2, type: "request", command: "attach", arguments: { worker: "w1", token: "typed-into-launch-json", pathMappings: [] } };

describe("DAP framing and attach tickets (pure)", () => {
  it("frames and unframes messages split anywhere", () => {
    const bytes = Buffer.concat([frame({ seq: 1, type: "event", event: "é" }), frame({ seq: 2, type: "response" })]);
    const first = unframe(bytes.subarray(0, 10));
    assert.deepStrictEqual(first.messages, []);
    const all = unframe(Buffer.concat([first.rest, bytes.subarray(10, bytes.length - 3)]));
    assert.deepStrictEqual(all.messages, [{ seq: 1, type: "event", event: "é" }]);
    assert.deepStrictEqual(unframe(Buffer.concat([all.rest, bytes.subarray(bytes.length - 3)])).messages, [{ seq: 2, type: "response" }]);
    assert.throws(() => unframe(Buffer.from("HTTP/1.1 200 OK\r\n\r\n")), /without Content-Length/);
  });

  it("binds a ticket to exactly the target the attach names, else to none", () => {
    assert.deepStrictEqual(ticketTarget({ worker: "w1", pathMappings: [] }), { worker: "w1" });
    assert.deepStrictEqual(ticketTarget({ rank: 2 }), { rank: 2 });
    assert.deepStrictEqual(ticketTarget({ rank: 2, job: "02000000" }), { rank: 2, job: "02000000" });
    assert.deepStrictEqual(ticketTarget({ crash: "c1" }), { crash: "c1" });
    assert.deepStrictEqual(ticketTarget({ worker: "w1", rank: 2 }), {}, "two targets: a ticket for any (the attach names them)");
    assert.deepStrictEqual(ticketTarget({ worker: "w1", job: "j" }), {});
    assert.deepStrictEqual(ticketTarget({ rank: 2, job: "" }), {});
    assert.deepStrictEqual(ticketTarget({}), {});
    assert.deepStrictEqual(withTicket({ worker: "w1", token: "x" }, TICKET), { worker: "w1", ticket: TICKET });
  });

  it("asks the broker for a ticket with the token, through the peer-checked client", async () => {
    const seen: { auth?: string; body: string }[] = [];
    const server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        const hello = /^\/v1\/hello\?nonce=([0-9a-f]+)$/.exec(req.url ?? "");
        if (hello) {
          const proof = createHmac("sha256", TOKEN).update(`raysleuth-broker-proof:${hello[1]}`).digest("hex");
          res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ proof }));
          return;
        }
        seen.push({ auth: req.headers.authorization, body });
        const reply = req.url === "/v1/tickets" && req.method === "POST" ? { ticket: TICKET, expires_in: 60, single_use: true } : { nope: 1 };
        res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(reply));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const client = new BrokerClient({ url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, token: TOKEN });
    try {
      assert.strictEqual(await createTicket(client, { rank: 1, job: "j" }), TICKET);
      assert.deepStrictEqual(seen, [{ auth: `Bearer ${TOKEN}`, body: '{"rank":1,"job":"j"}' }]);
    } finally {
      client.dispose();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe("The worker session's DAP pipe", () => {
  let dap: FakeDapServer | undefined;
  let squatter: NobodyListener | undefined;
  let adapter: BrokerDapAdapter | undefined;

  afterEach(async () => {
    adapter?.dispose();
    await dap?.stop();
    await squatter?.stop();
    adapter = dap = squatter = undefined;
  });

  it("sends attach with a fresh ticket and no token to a DAP port of ours, and pipes the answers back", async () => {
    dap = new FakeDapServer();
    await dap.start();
    const asked: Record<string, unknown>[] = [];
    adapter = new BrokerDapAdapter("127.0.0.1", dap.port, async (args) => {
      asked.push(args);
      return withTicket(args, TICKET);
    });
    const out = collect(adapter);
    adapter.handleMessage(initialize);
    adapter.handleMessage(attach);
    await until("the attach response and the initialized event", () => out.length >= 3);
    assert.deepStrictEqual(
      out.map((m) => [m.type, m.command ?? m.event, m.success]),
      [
        ["response", "initialize", true],
        ["response", "attach", true],
        ["event", "initialized", undefined],
      ],
    );
    assert.deepStrictEqual(dap.got[1].arguments, { worker: "w1", pathMappings: [], ticket: TICKET });
    assert.deepStrictEqual(asked, [{ worker: "w1", token: "typed-into-launch-json", pathMappings: [] }]);
  });

  it("sends nothing to a DAP port held by another user: no initialize, no ticket asked, the error names its uid", async function () {
    needNobody(this);
    squatter = new NobodyListener();
    await squatter.start();
    let ticketsAsked = 0;
    adapter = new BrokerDapAdapter("127.0.0.1", squatter.port, async (args) => {
      ticketsAsked++;
      return withTicket(args, TICKET);
    });
    const out = collect(adapter);
    adapter.handleMessage(initialize);
    adapter.handleMessage(attach);
    adapter.handleMessage({ seq: 3, type: "request", command: "disconnect" });
    await until("three answers", () => out.length >= 3);
    assert.strictEqual(out[0].success, false);
    assert.match(String(out[0].message), /^Ray Sleuth: The process listening at 127\.0\.0\.1:\d+ belongs to uid 65534, not to you \(uid 0\)/);
    assert.strictEqual(out[1].success, false);
    assert.strictEqual(out[2].success, true, "disconnect is answered so the session ends");
    assert.strictEqual(ticketsAsked, 0, "no ticket was spent on it");
    const seen = await squatter.ended(1);
    assert.deepStrictEqual(seen, [{ bytes: 0, secret: false }], "the squatter got no byte");
  });

  it("fails the attach with the reason when no ticket can be had, and sends no attach", async () => {
    dap = new FakeDapServer();
    await dap.start();
    adapter = new BrokerDapAdapter("127.0.0.1", dap.port, () => Promise.reject(new Error("not connected to a broker")));
    const out = collect(adapter);
    adapter.handleMessage(initialize);
    adapter.handleMessage(attach);
    await until("two answers", () => out.length >= 2);
    assert.deepStrictEqual(out.find((m) => m.command === "attach"), {
      seq: 0,
      type: "response",
      request_seq: 2,
      command: "attach",
      success: false,
      message: "Ray Sleuth: cannot get an attach ticket from the broker: not connected to a broker",
    });
    assert.deepStrictEqual(
      dap.got.map((m) => m.command),
      ["initialize"],
    );
  });
});
