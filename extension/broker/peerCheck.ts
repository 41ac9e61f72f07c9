// Who is on the other end of a loopback TCP connection: the uid of the process that holds the peer
// socket, read from the kernel's tables (/proc/net/tcp6, /proc/net/tcp), as the Python side does
// (python_backend/raysleuth/shared/peer.py). Every connection of the extension that carries the
// token (or asks for an attach ticket, or carries one) is checked with it on "connect", before
// its first byte: a relay another user runs on a dead broker's port gets nothing. No vscode import.
//
// Only Linux has the tables: elsewhere (an editor on a macOS or Windows laptop, reaching the head
// node through its own ssh tunnel) the peer must be on loopback and its owner is not checked.
import { promises as fsp } from "fs";
import * as net from "net";
import * as os from "os";
import { BrokerError } from "./brokerErrors";

const ESTABLISHED = "01";
/** The peer's row can trail our "connect" by a moment (the server's side of the handshake). */
const ROW_TRIES = 5;
const ROW_RETRY_MS = 10;

export const TUNNEL_HINT =
  "Reach a remote broker through a tunnel whose local end is yours: `ssh -L 7311:127.0.0.1:7311 HEAD` and use http://127.0.0.1:7311 (docs/remote.md).";

/** Whether `host` (a literal address or "localhost") is this machine's loopback. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").split("%")[0];
  if (h === "localhost" || h === "localhost.localdomain") {
    return true;
  }
  const bytes = addressBytes(h);
  if (!bytes) {
    return false;
  }
  const v4 = bytes.subarray(0, 12).equals(V4_MAPPED_PREFIX);
  return v4 ? bytes[12] === 127 : bytes.equals(IPV6_LOOPBACK);
}

const V4_MAPPED_PREFIX = Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
const IPV6_LOOPBACK = Buffer.from([...new Array<number>(15).fill(0), 1]);

/** A literal address as 16 bytes, an IPv4 one as ::ffff:a.b.c.d (the key of a table row); undefined when not an address. */
export function addressBytes(text: string): Buffer | undefined {
  const host = text.replace(/^\[|\]$/g, "").split("%")[0];
  if (net.isIPv4(host)) {
    return Buffer.concat([V4_MAPPED_PREFIX, Buffer.from(host.split(".").map(Number))]);
  }
  if (!net.isIPv6(host)) {
    return undefined;
  }
  let s = host;
  let v4: Buffer | undefined;
  if (s.includes(".")) {
    const at = s.lastIndexOf(":");
    v4 = Buffer.from(s.slice(at + 1).split(".").map(Number));
    s = `${s.slice(0, at + 1)}0:0`;
  }
  const halves = s.split("::");
  const words = (part: string) => (part ? part.split(":").map((w) => parseInt(w, 16)) : []);
  const head = words(halves[0]);
  const tail = halves.length > 1 ? words(halves[1]) : [];
  const all = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  const out = Buffer.alloc(16);
  all.forEach((w, i) => out.writeUInt16BE(w, i * 2));
  if (v4) {
    v4.copy(out, 12);
  }
  return out;
}

/** A table row's `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): each 32-bit word in host order. */
export function rowAddress(field: string, littleEndian = os.endianness() === "LE"): { addr: Buffer; port: number } {
  const [hexAddr, hexPort] = field.split(":");
  const raw = Buffer.from(hexAddr, "hex");
  const words = Buffer.alloc(raw.length);
  for (let i = 0; i < raw.length; i += 4) {
    const word = raw.subarray(i, i + 4);
    (littleEndian ? Buffer.from(word).reverse() : word).copy(words, i);
  }
  const addr = words.length === 4 ? Buffer.concat([V4_MAPPED_PREFIX, words]) : words;
  return { addr, port: parseInt(hexPort, 16) };
}

export interface Endpoint {
  addr: Buffer;
  port: number;
}

/** The uid and inode of the established socket whose own address is `local` and whose peer is `remote`, in one table's text. */
export function findRow(table: string, local: Endpoint, remote: Endpoint): { uid: number; inode: number } | undefined {
  for (const line of table.split("\n").slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 10 || cols[3] !== ESTABLISHED) {
      continue;
    }
    const l = rowAddress(cols[1]);
    const r = rowAddress(cols[2]);
    if (l.port === local.port && r.port === remote.port && l.addr.equals(local.addr) && r.addr.equals(remote.addr)) {
      return { uid: Number(cols[7]), inode: Number(cols[9]) };
    }
  }
  return undefined;
}

/** The uid of the process on the other end of `socket` (connected, loopback); undefined where the tables do not say. */
export async function peerUid(socket: net.Socket, tables?: readonly string[]): Promise<number | undefined> {
  const there = socket.remoteAddress ? addressBytes(socket.remoteAddress) : undefined;
  const here = socket.localAddress ? addressBytes(socket.localAddress) : undefined;
  if (!there || !here || socket.remotePort === undefined || socket.localPort === undefined) {
    return undefined;
  }
  // The peer's row: its own address is our remote one, its peer is us.
  const local = { addr: there, port: socket.remotePort };
  const remote = { addr: here, port: socket.localPort };
  // An IPv4 peer is in tcp, or in tcp6 when its listener is dual-stack; an IPv6 one only in tcp6.
  // Each read costs milliseconds where Ray keeps hundreds of sockets: the likely table first.
  const v4 = there.subarray(0, 12).equals(V4_MAPPED_PREFIX);
  const order = tables ?? (v4 ? ["/proc/net/tcp", "/proc/net/tcp6"] : ["/proc/net/tcp6"]);
  for (let attempt = 0; attempt < ROW_TRIES; attempt++) {
    for (const file of order) {
      let text: string;
      try {
        text = await fsp.readFile(file, "ascii");
      } catch {
        continue;
      }
      const row = findRow(text, local, remote);
      if (row) {
        return row.uid;
      }
    }
    if (socket.destroyed) {
      return undefined;
    }
    await new Promise((r) => setTimeout(r, ROW_RETRY_MS));
  }
  return undefined;
}

/** Whose sockets may receive our token: ours, and root's (who can read our files anyway). */
export function trustedUids(): Set<number> {
  return new Set([process.getuid?.() ?? -1, 0]);
}

/**
 * Rejects (BrokerError "untrusted") unless `socket`, just connected, reaches a process of ours (or
 * root's) on this machine's loopback. `where` names the address in the message; `url` is the
 * broker's URL for the error.
 */
export async function checkBrokerPeer(socket: net.Socket, where: string, url: string, tables?: readonly string[]): Promise<void> {
  const host = socket.remoteAddress;
  if (!host) {
    throw new BrokerError("network", `The connection to ${where} closed at once.`, url);
  }
  if (!isLoopback(host)) {
    throw new BrokerError(
      "untrusted",
      `${where} (${host}) is not on this machine's loopback, so it cannot be proven to be your broker, and the token was not sent. ${TUNNEL_HINT}`,
      url,
      undefined,
      TUNNEL_HINT,
    );
  }
  if (process.platform !== "linux" && !tables) {
    return; // no /proc/net/tcp to read: loopback is all that can be checked here
  }
  const uid = await peerUid(socket, tables);
  if (uid === undefined) {
    throw new BrokerError(
      "untrusted",
      `Cannot tell which process listens at ${where} (no row in /proc/net/tcp), so the token was not sent. Ray Sleuth needs Linux's /proc to prove that the broker is yours.`,
      url,
    );
  }
  const me = process.getuid?.() ?? -1;
  if (!trustedUids().has(uid)) {
    const hint = `A broker that died leaves its port free for anyone: start yours with "raysleuth broker", or check raySleuth.brokerAddress.`;
    throw new BrokerError(
      "untrusted",
      `The process listening at ${where} belongs to uid ${uid}, not to you (uid ${me}): it is not your broker, so the token was not sent to it. ${hint}`,
      url,
      undefined,
      hint,
    );
  }
}

/**
 * Connects to host:port and resolves with the socket once its peer passed `checkBrokerPeer`;
 * nothing is written before. Rejects with the refusal (the socket destroyed) or the connect error.
 */
export function connectChecked(host: string, port: number, url: string, timeoutMs?: number): Promise<net.Socket> {
  const where = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let timer: NodeJS.Timeout | undefined;
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    if (timeoutMs) {
      timer = setTimeout(() => fail(Object.assign(new Error(`no connection to ${where} within ${timeoutMs / 1000} s`), { name: "TimeoutError" })), timeoutMs);
    }
    socket.once("error", fail);
    socket.once("connect", () => {
      checkBrokerPeer(socket, where, url).then(() => {
        clearTimeout(timer);
        socket.off("error", fail);
        resolve(socket);
      }, fail);
    });
  });
}
