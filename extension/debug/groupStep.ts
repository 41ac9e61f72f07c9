// One step in many paused ranks at once (issue 27, "Step Over (Group)"): the worker sessions
// under the Ray cluster session each step on the thread they stopped on; paused members of the
// chosen rank group without a session here step through the broker (POST /v1/step). Within
// STEP_BOUND_MS, the ranks that did not stop again are named in one warning (typically waiting
// in a collective for a rank outside the group) instead of leaving the editor to guess.
import type * as vscode from "vscode";
import { log, swallow } from "../common/log";
import * as vsapi from "../common/vscodeapi";
import type { BrokerAccess } from "../broker/brokerConnection";
import type { StepReply } from "../broker/types";
import type { GroupStep } from "./clusterSessionAdapter";

/** How long a step waits for each stepped rank to stop again before naming the ones that run on. */
export const STEP_BOUND_MS = 5_000;

export interface GroupStepRequest {
  step: GroupStep;
  /** The chosen rank group's name, if any (for the messages). */
  group: string | undefined;
  /** The paused worker sessions to step, each with the thread it stopped on. */
  paused: { worker: string; session: vscode.DebugSession; threadId: number }[];
  /** Paused members of the group without a session in this window. */
  viaBroker: string[];
  broker: BrokerAccess | undefined;
  /** Resolves true at the session's next stopped event, false after the bound. */
  nextStop: (sessionId: string) => Promise<boolean>;
  labelOf: (workerId: string) => string;
}

/** Resolves true at the session's next stopped event (`stopped` fires session ids), false when `ms` pass first. */
export function nextStop(stopped: vscode.Event<string>, sessionId: string, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sub = stopped((id) => id === sessionId && finish(true));
    const timer = setTimeout(() => finish(false), ms);
    const finish = (v: boolean) => {
      clearTimeout(timer);
      sub.dispose();
      resolve(v);
    };
  });
}

/** Sends the steps; resolves once all were sent (throws naming the sessions whose step failed). */
export async function stepTogether(r: GroupStepRequest): Promise<void> {
  if (r.paused.length === 0 && r.viaBroker.length === 0) {
    throw new Error(r.group ? `no rank of group "${r.group}" is paused` : "no worker session under the Ray cluster session is paused");
  }
  const again = r.paused.map((p) => r.nextStop(p.session.id));
  const results = await Promise.allSettled(r.paused.map((p) => p.session.customRequest(r.step, { threadId: p.threadId })));
  const failed = results.flatMap((res, i) => (res.status === "rejected" ? [`${r.paused[i].session.name}: ${res.reason instanceof Error ? res.reason.message : String(res.reason)}`] : []));
  const client = r.viaBroker.length ? await r.broker?.ensureClient() : undefined;
  const brokerStep = client?.requestJson<StepReply>("POST", "/v1/step", { workers: r.viaBroker, kind: r.step, timeout: STEP_BOUND_MS / 1000 });
  log.info(
    `Ray cluster session: ${r.step} in ${r.paused.length - failed.length} of ${r.paused.length} paused worker session(s)` +
      `${r.viaBroker.length ? ` and ${r.viaBroker.length} through the broker` : ""}${r.group ? ` (rank group ${r.group})` : ""}`,
  );
  const stepped = r.paused.filter((_, i) => results[i].status === "fulfilled").map((p) => p.worker);
  void reportRunning(stepped, again.filter((_, i) => results[i].status === "fulfilled"), brokerStep, r.labelOf);
  if (failed.length) {
    throw new Error(`${r.step} failed in ${failed.join("; ")}`);
  }
}

/** The ranks a group step left running, said once every bound has passed. */
async function reportRunning(stepped: string[], again: Promise<boolean>[], brokerStep: Promise<StepReply> | undefined, labelOf: (id: string) => string): Promise<void> {
  try {
    const stopped = await Promise.all(again);
    const running = stepped.filter((_, i) => !stopped[i]).map(labelOf);
    const reply = await brokerStep;
    running.push(...(reply?.running ?? []).map((x) => `${labelOf(x.worker)} (${x.reason})`));
    if (running.length) {
      void vsapi.showWarningMessage(
        `Ray Sleuth: ${running.join(", ")} did not stop again within ${STEP_BOUND_MS / 1000} s: still running, perhaps waiting in a collective for a rank outside the group. Pause or Continue ${running.length === 1 ? "it" : "them"}.`,
      );
    }
  } catch (err) {
    swallow("Reporting the ranks a step left running failed", err);
  }
}
