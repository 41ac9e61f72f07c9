// The broker's wire formats the client reads and writes besides JSON bodies:
// the server-sent-event stream and the stacks query. No vscode import.
import { createParser } from "eventsource-parser";
import { formatRanks } from "../common/ranks";
import type { StacksQuery } from "./types";

/**
 * Feeds a text/event-stream body to `onEvent` as (event, data) pairs; resolves
 * when the body ends. The SSE grammar is eventsource-parser's.
 */
export async function readEventStream(body: AsyncIterable<Uint8Array>, onEvent: (event: string, data: string) => void): Promise<void> {
  const parser = createParser({ onEvent: (m) => onEvent(m.event ?? "message", m.data) });
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
  }
  parser.feed(decoder.decode());
}

/** The query string of `GET /v1/stacks` ("" when the query selects every worker). */
export function stacksQueryString(query: StacksQuery = {}): string {
  const params = new URLSearchParams();
  if (query.job) {
    params.set("job", query.job);
  }
  if (query.ranks?.length) {
    params.set("ranks", formatRanks(query.ranks));
  }
  if (query.workers?.length) {
    params.set("workers", query.workers.join(","));
  }
  if (query.native) {
    params.set("native", "1");
  }
  if (query.tree) {
    params.set("tree", "1");
  }
  if (query.timeout !== undefined) {
    params.set("timeout", String(query.timeout));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}
