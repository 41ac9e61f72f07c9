// Follows one worker's stdout or stderr through the broker
// (GET /v1/workers/{id}/logs): the tail first, then every new byte range from
// next_offset. Keeps a bounded text. Pure, no vscode import.
import type { WorkerLogChunk } from "../broker/types";
import { multiLine, oneLine } from "../common/textSafe";

/** How much of the log's end is read first. */
export const TAIL_BYTES = 64 * 1024;
/** The most text kept; older lines are dropped from the top. */
export const MAX_CHARS = 1_000_000;
/** The most ranges read in one poll (a log that grows fast is caught up over several). */
const MAX_READS_PER_POLL = 8;

export type ReadRange = (offset: number) => Promise<WorkerLogChunk>;

export class LogFollower {
  private body = "";
  /** Where the next read starts; negative before the first read (the tail). */
  private offset = -TAIL_BYTES;
  /** The log file on the worker's node, once known. */
  path: string | undefined;
  /** Lines dropped from the top (MAX_CHARS), for the header. */
  private dropped = false;
  /** Why following stopped (the worker is gone, its log with it); undefined while following. */
  stopped: string | undefined;

  constructor(
    /** e.g. "rank 0 · Trainer · pid 4242 (stdout)". */
    readonly title: string,
    private readonly read: ReadRange,
  ) {}

  /** The document's text: a header line, then the log. */
  get text(): string {
    const where = this.path ? ` · ${oneLine(this.path)}` : "";
    const cut = this.dropped ? " · older lines dropped" : "";
    const state = this.stopped === undefined ? "following live" : "not followed any more";
    const end = this.stopped === undefined ? "" : `# Stopped following: ${this.stopped}\n`;
    return `# ${oneLine(this.title)}${where} · ${state}${cut}\n${this.body}${end}`;
  }

  /** Ends the following (a read failed): the text says why, and poll() reads nothing more. */
  stop(reason: string): void {
    this.stopped = reason;
  }

  /** Reads what is new; resolves true when the text changed. */
  async poll(): Promise<boolean> {
    if (this.stopped !== undefined) {
      return false;
    }
    let changed = false;
    for (let i = 0; i < MAX_READS_PER_POLL; i++) {
      const chunk = await this.read(this.offset);
      if (this.path !== chunk.path) {
        this.path = chunk.path;
        changed = true;
      }
      if (this.offset >= 0 && chunk.size < this.offset) {
        // The file is shorter than where we were: a new file (rotated, or the worker restarted).
        this.body += "\n# (the log file started over)\n";
        this.offset = 0;
        changed = true;
        continue;
      }
      if (chunk.data) {
        this.append(chunk.data);
        changed = true;
      }
      const next = chunk.next_offset;
      const done = next >= chunk.size || next === this.offset || !chunk.data;
      this.offset = next;
      if (done) {
        break;
      }
    }
    return changed;
  }

  private append(data: string): void {
    // The worker's own output: its lines stay, an ESC or a bidi override is shown escaped (#37).
    this.body += multiLine(data.replace(/\r\n/g, "\n"));
    if (this.body.length > MAX_CHARS) {
      const cut = this.body.indexOf("\n", this.body.length - MAX_CHARS);
      this.body = this.body.slice(cut >= 0 ? cut + 1 : this.body.length - MAX_CHARS);
      this.dropped = true;
    }
  }
}
