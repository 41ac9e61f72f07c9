// Issue #37, finding 1 (extension side): no connection of the extension sends the token to a peer
// not proven to be a process of our uid (or root) on loopback. The /proc/net/tcp parsing on fixed
// rows, then real sockets: a listener of ours passes (IPv4, and a dual-stack one whose row is in
// tcp6 as ::ffff:127.0.0.1), and a relay run as `nobody` on "the broker's port", which forwards
// everything to the live broker (so the hello proof passes through it), gets no byte at all: not
// the proof request, not the token. Plain mocha, real processes, no Ray.
import * as assert from "assert";
import { createHmac } from "crypto";
import * as http from "http";
import * as net from "net";
import { BrokerClient, BrokerError } from "../../../extension/broker/brokerClient";
import { addressBytes, checkBrokerPeer, findRow, isLoopback, peerUid, rowAddress } from "../../../extension/broker/peerCheck";
import { NobodyListener, needNobody } from "./nobodyListener";

const TOKEN = "t0ken-of-the-test-broker-0123456789abcdef";

/** A broker of ours that proves the token and answers GET /v1/workers; records what reached it. */
async function fakeBroker(): Promise<{ server: http.Server; port: number; requests: http.IncomingHttpHeaders[] }> {
  const requests: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req.headers);
    const hello = /^\/v1\/hello\?nonce=([0-9a-f]+)$/.exec(req.url ?? "");
    if (hello) {
      const proof = createHmac("sha256", TOKEN).update(`raysleuth-broker-proof:${hello[1]}`).digest("hex");
      res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ broker: "raysleuth", proof }));
    } else if (req.url === "/v1/stream") {
      res.writeHead(200, { "Content-Type": "text/event-stream" }).write("event: workers\ndata: []\n\n");
    } else {
      res.writeHead(200, { "Content-Type": "application/json" }).end("[]");
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, port: (server.address() as net.AddressInfo).port, requests };
}

async function stopServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
}

function connected(port: number, host: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host }, () => resolve(s));
    s.once("error", reject);
  });
}

describe("Peer check: the kernel's TCP tables (pure)", () => {
  it("reads addresses as 16 bytes, IPv4 as ::ffff:a.b.c.d, and knows loopback", () => {
    assert.strictEqual(addressBytes("127.0.0.1")?.toString("hex"), "00000000000000000000ffff7f000001");
    assert.deepStrictEqual(addressBytes("::ffff:127.0.0.1"), addressBytes("127.0.0.1"));
    assert.strictEqual(addressBytes("::1")?.toString("hex"), "00000000000000000000000000000001");
    assert.strictEqual(addressBytes("[fe80::1%eth0]")?.toString("hex"), "fe800000000000000000000000000001");
    assert.strictEqual(addressBytes("localhost"), undefined);
    for (const h of ["127.0.0.1", "127.3.2.1", "::1", "[::1]", "::ffff:127.0.0.1", "localhost"]) {
      assert.ok(isLoopback(h), h);
    }
    for (const h of ["10.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "head-node", "128.0.0.1"]) {
      assert.ok(!isLoopback(h), h);
    }
  });

  it("reads a row's words in host order: IPv4, IPv6 and IPv4 in tcp6", () => {
    const v4 = rowAddress("0100007F:1F90", true);
    assert.strictEqual(v4.port, 8080);
    assert.deepStrictEqual(v4.addr, addressBytes("127.0.0.1"));
    assert.deepStrictEqual(rowAddress("00000000000000000000000001000000:0050", true).addr, addressBytes("::1"));
    assert.deepStrictEqual(rowAddress("0000000000000000FFFF00000100007F:0050", true).addr, addressBytes("127.0.0.1"));
    assert.deepStrictEqual(rowAddress("7F000001:1F90", false).addr, addressBytes("127.0.0.1"));
  });

  it("finds the established row whose local end is the given one, with its uid and inode", () => {
    const table = [
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0",
      "   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000 65534        0 222 1 0 20 4 30 10 -1",
      "   2: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 20 4 30 10 -1",
    ].join("\n");
    const loop = addressBytes("127.0.0.1")!;
    const le = rowAddress("0100007F:1F90").addr.equals(loop); // this machine's order
    if (!le) {
      return; // the fixed rows above are little-endian
    }
    assert.deepStrictEqual(findRow(table, { addr: loop, port: 8080 }, { addr: loop, port: 0xd431 }), { uid: 65534, inode: 222 });
    assert.deepStrictEqual(findRow(table, { addr: loop, port: 0xd431 }, { addr: loop, port: 8080 }), { uid: 0, inode: 333 });
    assert.strictEqual(findRow(table, { addr: loop, port: 8080 }, { addr: loop, port: 1 }), undefined, "the LISTEN row is no peer");
  });
});

describe("Peer check on real sockets", () => {
  const servers: net.Server[] = [];
  const sockets: net.Socket[] = [];

  afterEach(async () => {
    sockets.splice(0).forEach((s) => s.destroy());
    for (const s of servers.splice(0)) {
      await new Promise((r) => s.close(r));
    }
  });

  async function listen(host: string, options: net.ListenOptions = {}): Promise<number> {
    const server = net.createServer((c) => sockets.push(c));
    servers.push(server);
    await new Promise<void>((r) => server.listen({ port: 0, host, ...options }, r));
    return (server.address() as net.AddressInfo).port;
  }

  it("finds our own uid behind a listener of ours, and lets it through", async () => {
    const port = await listen("127.0.0.1");
    const s = await connected(port, "127.0.0.1");
    sockets.push(s);
    assert.strictEqual(await peerUid(s), process.getuid?.());
    await checkBrokerPeer(s, `127.0.0.1:${port}`, "test");
  });

  it("finds the peer of a dual-stack listener, whose row is in tcp6 as ::ffff:127.0.0.1", async function () {
    let port: number;
    try {
      port = await listen("::", { ipv6Only: false });
    } catch {
      this.skip(); // no IPv6 on this machine
    }
    const s = await connected(port, "127.0.0.1");
    sockets.push(s);
    assert.strictEqual(await peerUid(s), process.getuid?.());
  });

  it("refuses a peer that is not on loopback before it would send anything", async function () {
    const s = new net.Socket();
    Object.defineProperty(s, "remoteAddress", { value: "10.1.2.3" });
    const err = await checkBrokerPeer(s, "10.1.2.3:7311", "http://10.1.2.3:7311").then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof BrokerError && err.kind === "untrusted", String(err));
    assert.match(err.message, /not on this machine's loopback.*ssh -L 7311:127\.0\.0\.1:7311.*docs\/remote\.md/);
  });
});

describe("A relay of another user on the broker's port (runs as nobody)", () => {
  let relay: NobodyListener | undefined;
  let broker: Awaited<ReturnType<typeof fakeBroker>> | undefined;

  beforeEach(function () {
    needNobody(this);
  });

  afterEach(async () => {
    await relay?.stop();
    if (broker) {
      await stopServer(broker.server);
    }
    relay = broker = undefined;
  });

  it("gets no byte from the client, not the hello proof and not the token, and the error names its uid", async () => {
    broker = await fakeBroker();
    relay = new NobodyListener();
    await relay.start(broker.port); // everything it gets goes on to the live broker
    assert.strictEqual(relay.uid, 65534);
    const client = new BrokerClient({ url: `http://127.0.0.1:${relay.port}`, token: TOKEN, minBackoffMs: 20, maxBackoffMs: 50 });
    try {
      const err = await client.getWorkers().then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof BrokerError, `a BrokerError, not ${String(err)}`);
      assert.strictEqual(err.kind, "untrusted");
      assert.match(err.message, /belongs to uid 65534, not to you \(uid 0\): it is not your broker, so the token was not sent to it/);
      // The event stream is refused the same way, on every try.
      const streamErrors: BrokerError[] = [];
      client.onStreamError((e) => streamErrors.push(e));
      client.startStream();
      const deadline = Date.now() + 5000;
      while (streamErrors.length < 2 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      client.stopStream();
      assert.ok(streamErrors.length >= 2 && streamErrors.every((e) => e.kind === "untrusted"), streamErrors.map((e) => e.message).join(" | "));
      const seen = await relay.ended(3);
      assert.deepStrictEqual(
        seen.filter((c) => c.bytes > 0),
        [],
        "the relay got no byte on any connection",
      );
      assert.deepStrictEqual(broker.requests, [], "nothing reached the broker through the relay");
    } finally {
      client.dispose();
    }
  });

  it("a broker of ours on the same machine still gets the token", async () => {
    broker = await fakeBroker();
    const client = new BrokerClient({ url: `http://127.0.0.1:${broker.port}`, token: TOKEN });
    try {
      assert.deepStrictEqual(await client.getWorkers(), []);
      assert.strictEqual(broker.requests.at(-1)?.authorization, `Bearer ${TOKEN}`);
    } finally {
      client.dispose();
    }
  });
});
