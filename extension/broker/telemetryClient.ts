// The broker's reads for tensors across ranks, GPU memory and the timeline
// (issue 14): `GET /v1/inspect`, `/v1/gpu`, `/v1/events`, `/v1/crashes`, over
// a BrokerClient's requestJson. No vscode import; plain mocha tests it.
import type { BrokerClient } from "./brokerClient";
import { CrashRecordSummary, GpuRow, InspectQuery, InspectRow, TimelineEvent } from "./telemetryTypes";

type Requester = Pick<BrokerClient, "requestJson">;

/** The query string of `GET /v1/inspect` ("" when nothing narrows it). */
export function inspectQueryString(query: InspectQuery = {}): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== "") {
      params.set(k, String(v));
    }
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

/** `raysleuth.inspect()` rows, one per rank and entry, flagged; name and step absent: each name's latest step. */
export function getInspect(client: Requester, query: InspectQuery = {}): Promise<InspectRow[]> {
  return client.requestJson<InspectRow[]>("GET", `/v1/inspect${inspectQueryString(query)}`);
}

/** Every worker with GPU samples, by rank. */
export function getGpu(client: Requester): Promise<GpuRow[]> {
  return client.requestJson<GpuRow[]>("GET", "/v1/gpu");
}

/** Timeline entries with a seq above `since`, oldest first. */
export function getEvents(client: Requester, since = 0): Promise<TimelineEvent[]> {
  return client.requestJson<TimelineEvent[]>("GET", `/v1/events?since=${Math.max(0, Math.floor(since))}`);
}

/** Crash records, newest first. */
export function getCrashes(client: Requester): Promise<CrashRecordSummary[]> {
  return client.requestJson<CrashRecordSummary[]>("GET", "/v1/crashes");
}
