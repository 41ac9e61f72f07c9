// A worker's log followed from the broker's byte ranges (issue #13, Build 6):
// the tail first, then from next_offset, a file that starts over. Plain mocha.
import * as assert from "assert";
import { LogFollower, TAIL_BYTES } from "../../../extension/views/logFollower";
import type { WorkerLogChunk } from "../../../extension/broker/types";

/** A log file as the broker would serve it. */
function fakeLog(initial: string) {
  const file = { text: initial };
  const asked: number[] = [];
  const read = (offset: number): Promise<WorkerLogChunk> => {
    asked.push(offset);
    const size = file.text.length;
    const start = offset < 0 ? Math.max(0, size + offset) : Math.min(offset, size);
    const data = file.text.slice(start, start + 10);
    return Promise.resolve({ worker: "w1", stream: "out", path: "/tmp/ray/logs/worker-w1.out", offset: start, next_offset: start + data.length, size, data });
  };
  return { file, asked, read };
}

describe("Worker log follower", () => {
  it("reads the tail, then only what is new", async () => {
    const log = fakeLog("step 1\nstep 2\n");
    const f = new LogFollower("rank 0 · Trainer · pid 7 (stdout)", log.read);
    assert.ok(await f.poll());
    assert.strictEqual(f.text, "# rank 0 · Trainer · pid 7 (stdout) · /tmp/ray/logs/worker-w1.out · following live\nstep 1\nstep 2\n");
    assert.strictEqual(log.asked[0], -TAIL_BYTES);
    assert.strictEqual(await f.poll(), false, "nothing new");
    log.file.text += "step 3\n";
    assert.ok(await f.poll());
    assert.ok(f.text.endsWith("step 2\nstep 3\n"));
    assert.deepStrictEqual(log.asked.slice(-1), [14], "asked from the previous next_offset");
  });

  it("starts over when the file got shorter", async () => {
    const log = fakeLog("a long first line\n");
    const f = new LogFollower("w", log.read);
    await f.poll();
    log.file.text = "new\n";
    assert.ok(await f.poll());
    assert.ok(f.text.endsWith("a long first line\n\n# (the log file started over)\nnew\n"), f.text);
  });

  it("stops following when told why, and says so", async () => {
    const log = fakeLog("last words\n");
    const f = new LogFollower("w", log.read);
    await f.poll();
    f.stop("No worker with id w1.");
    log.file.text += "more\n";
    assert.strictEqual(await f.poll(), false);
    assert.match(f.text, /· not followed any more\n/);
    assert.ok(f.text.endsWith("last words\n# Stopped following: No worker with id w1.\n"), f.text);
  });
});
