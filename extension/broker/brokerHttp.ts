// HTTP to the broker over node:http, every connection proven before its first byte: an
// http.Agent whose createConnection connects a socket, checks on "connect" that its peer is a
// process of ours (or root's) on loopback (peerCheck.ts), and only then hands it to the request
// (the callback form of Agent#createConnection: it returns nothing and calls back later). A
// refused peer fails the request with the refusal; no header, no token, was written. No vscode import.
import * as http from "http";
import * as net from "net";
import type { Duplex } from "stream";
import { BrokerError } from "./brokerErrors";
import { checkBrokerPeer, TUNNEL_HINT } from "./peerCheck";

export interface HttpRequest {
  method?: string;
  headers: Record<string, string>;
  body?: string;
  /** Bound on the whole exchange (connect, check, answer, body), in ms. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** One connection per request (no keep-alive): each is checked, none is reused after the broker went away. */
export class PeerCheckedAgent extends http.Agent {
  constructor(private readonly brokerUrl: string) {
    super({ keepAlive: false });
  }

  override createConnection(options: http.ClientRequestArgs, oncreate?: (err: Error | null, stream: Duplex) => void): undefined {
    const host = (options.hostname ?? options.host ?? "localhost").replace(/^\[|\]$/g, "");
    const port = Number(options.port ?? 80);
    const where = `${host.includes(":") ? `[${host}]` : host}:${port}`;
    const socket = net.connect({ host, port });
    const failed = (err: Error) => {
      socket.destroy();
      oncreate?.(err, socket);
    };
    socket.once("error", failed);
    socket.once("connect", () => {
      checkBrokerPeer(socket, where, this.brokerUrl).then(() => {
        socket.off("error", failed);
        oncreate?.(null, socket);
      }, failed);
    });
    return undefined;
  }
}

/** The URL to request, refused unless plain http (the broker speaks HTTP; TLS would hide nothing from a local relay). */
function target(url: string, brokerUrl: string): URL {
  const u = new URL(url); // a TypeError (ERR_INVALID_URL) for a bad address: fetchError names it
  if (u.protocol !== "http:") {
    throw new BrokerError(
      "protocol",
      `The broker address ${brokerUrl} is not http://: the broker speaks plain HTTP on this machine's loopback. ${TUNNEL_HINT}`,
      brokerUrl,
      undefined,
      TUNNEL_HINT,
    );
  }
  return u;
}

function timeoutError(ms: number): Error {
  return Object.assign(new Error(`no answer within ${ms / 1000} s`), { name: "TimeoutError" });
}

/** Sends one request and reads its whole answer as text. */
export function sendText(agent: PeerCheckedAgent, brokerUrl: string, url: string, r: HttpRequest): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = http.request(target(url, brokerUrl), { method: r.method ?? "GET", headers: r.headers, agent });
    } catch (err) {
      reject(err);
      return;
    }
    const timer = r.timeoutMs
      ? setTimeout(() => {
          const err = timeoutError(r.timeoutMs ?? 0);
          req.destroy(err);
          reject(err);
        }, r.timeoutMs)
      : undefined;
    const fail = (err: Error) => {
      clearTimeout(timer);
      reject(err);
    };
    req.on("error", fail);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", fail);
      res.on("end", () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") });
      });
    });
    req.end(r.body);
  });
}

/** Sends a request and resolves with the response once its headers came (the event stream); `signal` ends it. */
export function openResponse(agent: PeerCheckedAgent, brokerUrl: string, url: string, r: HttpRequest): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = http.request(target(url, brokerUrl), { method: r.method ?? "GET", headers: r.headers, agent, signal: r.signal });
    } catch (err) {
      reject(err);
      return;
    }
    req.on("error", reject);
    req.on("response", resolve);
    req.end(r.body);
  });
}

/** A response's whole body as text. */
export async function bodyText(res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) {
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}
