// What a failed broker call tells the user: the kind of failure and a message
// that says what failed and what to do next. No vscode import.
import type { BrokerErrorBody } from "./types";

/** "untrusted": the peer is not proven to be a process of ours on loopback (peerCheck.ts), or a
 *  file was refused (fileTrust.ts); nothing was sent. */
export type BrokerErrorKind = "refused" | "unauthorized" | "untrusted" | "http" | "timeout" | "network" | "protocol";

/** A failed broker call; `message` says what failed and what to do next. */
export class BrokerError extends Error {
  constructor(
    readonly kind: BrokerErrorKind,
    message: string,
    readonly url: string,
    readonly status?: number,
    readonly hint?: string,
    /** The broker's own `error` text, without the what-failed framing of `message`. */
    readonly brokerError?: string,
  ) {
    super(message);
    this.name = "BrokerError";
  }
}

/** A BrokerError for an HTTP answer that is not 2xx, with the broker's own error and hint. */
export function statusError(url: string, status: number, text: string, what: string): BrokerError {
  let body: Partial<BrokerErrorBody> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object") {
      body = parsed as Partial<BrokerErrorBody>;
    }
  } catch {
    body = { error: text.trim().slice(0, 200) || undefined };
  }
  const detail = [body.error, body.hint].filter(Boolean).join(" ");
  if (status === 401) {
    return new BrokerError(
      "unauthorized",
      `The broker at ${url} rejected the token (401 Unauthorized)${detail ? `: ${detail}` : "."} ` +
        `Check raySleuth.tokenFile or RAYSLEUTH_TOKEN, or the token_file named in broker.json.`,
      url,
      status,
      body.hint,
      body.error,
    );
  }
  return new BrokerError("http", `Broker ${what} at ${url} failed (${status})${detail ? `: ${detail}` : "."}`, url, status, body.hint, body.error);
}

/** What went wrong before an HTTP status came back: the socket's error (node:http), or fetch's TypeError with it as its cause. */
export function fetchError(url: string, timeoutMs: number, err: unknown, what: string): BrokerError {
  if (err instanceof BrokerError) {
    return err;
  }
  const e = err as Error & { cause?: Error & { code?: string; errors?: { code?: string }[] } };
  if (e?.name === "TimeoutError") {
    return new BrokerError("timeout", `The broker at ${url} did not answer ${what} within ${timeoutMs / 1000} s. Check that it is running ("raysleuth doctor").`, url);
  }
  // A name with several addresses (localhost) fails as an AggregateError of one error per address.
  const own = e as Error & { code?: string; errors?: { code?: string }[] };
  const code = own?.code ?? own?.errors?.[0]?.code ?? e?.cause?.code ?? e?.cause?.errors?.[0]?.code;
  if (code === "ECONNREFUSED") {
    return new BrokerError(
      "refused",
      `Cannot reach the broker at ${url} (connection refused). Start it with "raysleuth broker" or set raySleuth.brokerAddress.`,
      url,
    );
  }
  if (code === "ERR_INVALID_URL" || (e instanceof TypeError && /URL/.test(e.message) && !e.cause?.code)) {
    return new BrokerError("protocol", `Invalid broker address ${url}: ${e.message}. Check raySleuth.brokerAddress.`, url);
  }
  const detail = e?.cause?.message ? `${e.message} (${e.cause.message})` : String(e?.message ?? err);
  return new BrokerError("network", `Broker ${what} at ${url} failed: ${detail}. Check that the broker runs ("raysleuth doctor").`, url);
}
