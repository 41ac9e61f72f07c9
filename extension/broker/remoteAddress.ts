// Where the editor reaches a broker it knows only by one address (a remote
// head node through ssh -L or kubectl port-forward): its DAP sessions ride the
// HTTP port too when the broker says so (dap_on_http). Only a loopback address is taken: the
// token goes nowhere the extension cannot prove is the user's own process. Pure, no vscode import.
import { isLoopback, TUNNEL_HINT } from "./peerCheck";
import { BrokerStatus } from "./types";

/**
 * The DAP front door to use: the HTTP address's host and port when the broker takes DAP there
 * (one tunnelled port is enough), else the `dap` address the broker reports.
 */
export function dapAddressFor(brokerUrl: string, status: BrokerStatus): string {
  if (!status.dap_on_http) {
    return status.dap;
  }
  const url = new URL(brokerUrl);
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return `${url.hostname}:${port}`; // an IPv6 hostname keeps its brackets: "[::1]:7311"
}

/** Checks what a user typed as a broker address; the normalized URL, or why it is not one. */
export function parseBrokerAddress(text: string): { url: string } | { error: string } {
  let t = text.trim();
  if (!t) {
    return { error: "Type the broker's address, e.g. http://127.0.0.1:7311" };
  }
  if (!/^[a-z]+:\/\//i.test(t)) {
    t = `http://${t}`; // "127.0.0.1:7311" is what people type
  }
  let url: URL;
  try {
    url = new URL(t);
  } catch {
    return { error: `"${text.trim()}" is not an address: use http://HOST:PORT` };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return { error: `The broker speaks HTTP: use http://HOST:PORT, not ${url.protocol}` };
  }
  if (url.protocol !== "http:") {
    return { error: `The broker speaks plain HTTP on this machine's loopback: use http://127.0.0.1:PORT, the local end of your tunnel, not ${url.protocol}` };
  }
  if (!url.port) {
    return { error: "Give the port too: the one you forward, e.g. http://127.0.0.1:7311" };
  }
  if (!isLoopback(url.hostname)) {
    return { error: `${url.hostname} is not this machine's loopback: the token goes only to a broker proven yours on loopback. ${TUNNEL_HINT}` };
  }
  return { url: `${url.protocol}//${url.host}` };
}
