// The Stacks view's content from made-up `GET /v1/stacks` answers: labels with
// rank ranges and counts, which group is marked as holding the others back,
// jobs, workers without a stack, copy text and the path mapping of a frame.
// Plain mocha: no broker, no window.
import * as assert from "assert";
import * as path from "path";
import { StackFrame, StackGroup, StacksResult, StacksWorker } from "../../../extension/broker/types";
import {
  buildStackTree,
  groupLabel,
  groupText,
  isLibraryPath,
  localPath,
  resultSummary,
  resultText,
  StackGroupNode,
  StackJobNode,
  StackNode,
  stackChildren,
  stackSummary,
  topUserFrame,
} from "../../../extension/views/stackTree";

const RAY = "/venv/lib/python3.12/site-packages/ray/_private/worker.py";
const TORCH = "/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py";

function frame(p: string, line: number, fn: string, code: string | null = null): StackFrame {
  return { path: p, line, function: fn, code };
}

const ALL_REDUCE: StackFrame[] = [
  frame(TORCH, 2801, "all_reduce", "work = group.allreduce([tensor], opts)"),
  frame("/app/train.py", 88, "train_step", "dist.all_reduce(grad)"),
  frame("/app/train.py", 120, "fit", "loss = self.train_step(batch)"),
  frame(RAY, 900, "main_loop"),
];
const LOADER: StackFrame[] = [frame("/app/data.py", 42, "__next__", "time.sleep(0.1)"), frame("/app/train.py", 118, "fit", "batch = next(it)"), frame(RAY, 900, "main_loop")];

function worker(rank: number | null, id: string, job: string | null = "02000000", extra: Partial<StacksWorker> = {}): StacksWorker {
  return {
    worker: id,
    rank,
    pid: 1000 + (rank ?? 99),
    node_id: "n1",
    job_id: job,
    actor_class: "Trainer",
    task: null,
    source: "agent",
    error: null,
    hint: null,
    step: null,
    threads: [{ name: "MainThread", id: 1, main: true, frames: rank === 3 ? LOADER : ALL_REDUCE }],
    ...extra,
  };
}

function group(ranks: number[], ranksText: string, frames: StackFrame[], minority: boolean, job: string | null = "02000000"): StackGroup {
  return { job_id: job, ranks, ranks_text: ranksText, workers: ranks.map((r) => `w${r}`), count: ranks.length, frames, minority };
}

function hangResult(extra: Partial<StacksResult> = {}): StacksResult {
  return {
    time: 1_700_000_000,
    elapsed_ms: 312.4,
    workers: [0, 1, 2, 3].map((r) => worker(r, `w${r}`)),
    groups: [group([0, 1, 2], "0-2", ALL_REDUCE, false), group([3], "3", LOADER, true)],
    collectives: [],
    behind: [{ rank: 3, worker: "w3", why: "rank 3 last entered #118; ranks 0-2 wait in gloo:all_reduce #119" }],
    text: "",
    ...extra,
  };
}

function groups(nodes: StackNode[]): StackGroupNode[] {
  return nodes.flatMap((n) => (n.kind === "group" ? [n] : n.kind === "job" ? groups(n.children) : []));
}

describe("Stacks view content", () => {
  it("labels groups with their rank ranges and counts", () => {
    assert.strictEqual(groupLabel(group([0, 1, 2, 4, 5, 6, 7], "0-2,4-7", ALL_REDUCE, false)), "ranks 0-2,4-7 (7)");
    assert.strictEqual(groupLabel(group([3], "3", LOADER, true)), "rank 3 (1)");
    assert.strictEqual(groupLabel({ ...group([0, 1, 2], "0-2", LOADER, false), count: 4 }), "ranks 0-2 and 1 more (4)");
    assert.strictEqual(groupLabel({ ...group([], "", LOADER, false), workers: ["a", "b"], count: 2 }), "2 workers (2)");
  });

  it("puts one job's groups at the top, the lagging one marked with why it is behind", () => {
    const roots = buildStackTree(hangResult());
    assert.deepStrictEqual(
      roots.map((n) => [n.kind, n.label]),
      [
        ["group", "ranks 0-2 (3)"],
        ["group", "rank 3 (1)"],
      ],
    );
    const [majority, lagging] = groups(roots);
    assert.strictEqual(majority.lagging, false);
    assert.strictEqual(majority.description, "all_reduce ← train_step train.py:88 ← fit train.py:120", "the library call by name, then the user's frames");
    assert.strictEqual(lagging.lagging, true);
    assert.strictEqual(lagging.description, "behind: last entered #118; ranks 0-2 wait in gloo:all_reduce #119");
    assert.match(lagging.tooltip, /^rank 3 \(1\) · job 02000000\nbehind: rank 3 last entered #118/);
    const minority = groups(buildStackTree(hangResult({ behind: [{ rank: 3, worker: "w3", why: "stack differs from ranks 0-2 (3 of 4)" }] })))[1];
    assert.match(minority.tooltip, /^rank 3 \(1\) · job 02000000\nbehind: rank 3: stack differs from ranks 0-2 \(3 of 4\)$/m, "a reason that does not name the rank gets it");
    assert.deepStrictEqual(lagging.ranks, [3]);
  });

  it("expands a group to its frames, innermost first, library frames told apart", () => {
    const [majority] = groups(buildStackTree(hangResult()));
    const frames = stackChildren(majority);
    assert.deepStrictEqual(
      frames.map((f) => (f.kind === "frame" ? [f.label, f.description, f.library] : [])),
      [
        ["all_reduce", "distributed_c10d.py:2801", true],
        ["train_step", "train.py:88", false],
        ["fit", "train.py:120", false],
        ["main_loop", "worker.py:900", true],
      ],
    );
    const f = frames[1];
    assert.ok(f.kind === "frame");
    assert.strictEqual(f.groupId, majority.id);
    assert.strictEqual(f.tooltip, "train_step — /app/train.py:88\n\ndist.all_reduce(grad)");
    assert.strictEqual(new Set(frames.map((x) => x.id)).size, frames.length, "ids are unique");
  });

  it("marks the minority group when no rank is named behind, and none on a tie", () => {
    const minority = buildStackTree(hangResult({ behind: [] }));
    assert.deepStrictEqual(
      groups(minority).map((g) => [g.label, g.lagging, g.description]),
      [
        ["ranks 0-2 (3)", false, "all_reduce ← train_step train.py:88 ← fit train.py:120"],
        ["rank 3 (1)", true, "stack differs: __next__ data.py:42 ← fit train.py:118"],
      ],
    );
    const tie = buildStackTree(hangResult({ behind: [], groups: [group([0, 1], "0-1", ALL_REDUCE, false), group([2, 3], "2-3", LOADER, false)] }));
    assert.deepStrictEqual(
      groups(tie).map((g) => g.lagging),
      [false, false],
    );
  });

  it("marks the groups of ranks named behind by step even when they are the larger group", () => {
    const roots = buildStackTree(
      hangResult({
        groups: [group([0, 1, 2], "0-2", LOADER, false), group([3], "3", ALL_REDUCE, true)],
        behind: [0, 1, 2].map((r) => ({ rank: r, worker: `w${r}`, why: `rank ${r} last step 41; others 42` })),
      }),
    );
    const [big, small] = groups(roots);
    assert.strictEqual(big.lagging, true);
    assert.strictEqual(big.description, "behind: last step 41; others 42", "the same reason once");
    assert.strictEqual(small.lagging, false, "the rank named behind wins over the minority mark");
  });

  it("splits an answer of two jobs into job nodes, and lists a worker that gave no stack with why", () => {
    const silent = worker(5, "w5", "03000000", { source: null, error: "no answer within 2 s", hint: "its interpreter may hold the GIL in C code; try --native", threads: [] });
    const result = hangResult({
      workers: [...hangResult().workers, worker(4, "w4", "03000000"), silent],
      groups: [...hangResult().groups, group([4], "4", ALL_REDUCE, false, "03000000")],
    });
    const roots = buildStackTree(result);
    assert.deepStrictEqual(
      roots.map((n) => [n.kind, n.label, n.description]),
      [
        ["job", "job 02000000", "2 groups · 4 workers"],
        ["job", "job 03000000", "1 group · 2 workers · 1 without a stack"],
      ],
    );
    const second = roots[1] as StackJobNode;
    assert.deepStrictEqual(
      second.children.map((c) => [c.kind, c.label, c.description]),
      [
        ["group", "rank 4 (1)", "all_reduce ← train_step train.py:88 ← fit train.py:120"],
        ["unanswered", "rank 5 · no stack", "no answer within 2 s"],
      ],
    );
    assert.match(second.children[1].tooltip, /hint: its interpreter may hold the GIL/);
    assert.strictEqual(resultSummary(result), "6 workers in 312 ms · 2 jobs");
  });

  it("copies a group as its label, why and frames, and the whole view as the broker's text", () => {
    const [, lagging] = groups(buildStackTree(hangResult()));
    assert.strictEqual(
      groupText(lagging),
      [
        "job 02000000: rank 3 (1): __next__ data.py:42 ← fit train.py:118",
        "  behind: rank 3 last entered #118; ranks 0-2 wait in gloo:all_reduce #119",
        "    __next__  /app/data.py:42 | time.sleep(0.1)",
        "    fit  /app/train.py:118 | batch = next(it)",
        `    main_loop  ${RAY}:900`,
        "",
      ].join("\n"),
    );
    assert.strictEqual(resultText(hangResult({ text: "ranks 0-2 (3): all_reduce ← train_step train.py:88" })), "ranks 0-2 (3): all_reduce ← train_step train.py:88\n");
    const fallback = resultText(hangResult());
    assert.ok(fallback.startsWith("job 02000000: ranks 0-2 (3): all_reduce ← train_step train.py:88 ← fit train.py:120\n    all_reduce  "), fallback);
    assert.ok(fallback.includes("\njob 02000000: rank 3 (1): __next__ data.py:42 ← fit train.py:118\n  behind: rank 3 last entered #118"), fallback);
  });

  it("folds runs of library frames into one node, the broker's library mark first (issue #38)", () => {
    const sp = "/venv/lib/python3.11/site-packages";
    const lib = (p: string, line: number, fn: string): StackFrame => ({ ...frame(p, line, fn), library: true });
    const verl: StackFrame[] = [
      frame("/usr/lib/python3.11/threading.py", 331, "wait"),
      frame("/usr/lib/python3.11/threading.py", 629, "wait"),
      frame("/app/roles.py", 22, "helper"),
      frame(`${sp}/verl/single_controller/base/decorator.py`, 431, "inner"),
      frame("/app/roles.py", 40, "init_model"),
      frame(`${sp}/verl/utils/transferqueue_utils.py`, 378, "inner"),
      frame(`${sp}/verl/single_controller/base/decorator.py`, 431, "inner"),
      frame(`${sp}/verl/single_controller/ray/base.py`, 934, "func"),
      lib("python/ray/_raylet.pyx", 1811, "execute_task"),
      lib("python/ray/_raylet.pyx", 2990, "run_task_loop"),
    ];
    const tree = buildStackTree({ ...hangResult(), groups: [group([0], "0", verl, false)], behind: [] });
    const [g] = groups(tree);
    const shown = stackChildren(g);
    assert.deepStrictEqual(
      shown.map((n) => [n.kind, n.label, n.description]),
      [
        ["frame", "wait", "threading.py:331"],
        ["frame", "wait", "threading.py:629"],
        ["frame", "helper", "roles.py:22"],
        ["frame", "inner", "decorator.py:431"],
        ["frame", "init_model", "roles.py:40"],
        ["library", "5 library frames", "inner, inner, func, execute_task, …"],
      ],
    );
    const run = shown[5];
    assert.ok(run.kind === "library");
    assert.strictEqual(stackChildren(run).length, 5);
    assert.ok(run.frames.every((f) => f.library && f.runId === run.id && f.groupId === g.id));
    assert.match(run.tooltip, /^inner — \/venv\/lib\/python3\.11\/site-packages\/verl\/utils\/transferqueue_utils\.py:378\n/);
    assert.strictEqual(g.frames.length, verl.length, "the group's frames stay whole for its actions");
    assert.strictEqual(new Set([...shown, ...run.frames].map((n) => n.id)).size, shown.length + run.frames.length);
    // The broker's mark wins over the path: a package the user declared theirs is user code.
    const mine = { ...frame(`${sp}/mypkg/model.py`, 5, "step"), library: false };
    assert.strictEqual(topUserFrame([lib("python/ray/_raylet.pyx", 1, "execute_task"), mine])?.function, "step");
    const allLibrary = buildStackTree({ ...hangResult(), groups: [group([1], "1", verl.slice(5), false)], behind: [] });
    assert.deepStrictEqual(stackChildren(groups(allLibrary)[0]).map((n) => n.kind), ["frame", "frame", "frame", "frame", "frame"], "no user frame: nothing folded");
  });

  it("tells library frames from the user's code", () => {
    assert.ok(isLibraryPath(RAY));
    assert.ok(isLibraryPath("/usr/lib/python3.12/threading.py"));
    assert.ok(isLibraryPath("<frozen importlib._bootstrap>"));
    assert.ok(!isLibraryPath("/home/me/project/train.py"));
    assert.strictEqual(topUserFrame(ALL_REDUCE)?.function, "train_step");
    assert.strictEqual(topUserFrame([frame(RAY, 1, "only")])?.function, "only", "all library: the innermost");
    assert.strictEqual(topUserFrame([]), undefined);
  });

  it("sums a stack up in one line as the CLI does: the library call by name, not its decorator's wrapper", () => {
    const wrapped = [frame(TORCH, 10, "all_reduce"), frame(TORCH, 20, "wrapper"), ...ALL_REDUCE.slice(1)];
    assert.strictEqual(stackSummary(wrapped), "all_reduce ← train_step train.py:88 ← fit train.py:120");
    const deep = [frame("/a/x.py", 1, "a"), frame("/a/x.py", 2, "b"), frame("/a/x.py", 3, "c"), frame("/a/x.py", 4, "d")];
    assert.strictEqual(stackSummary(deep), "a x.py:1 ← b x.py:2 ← c x.py:3 ← …");
    assert.strictEqual(stackSummary([frame(RAY, 900, "main_loop")]), "main_loop worker.py:900");
    assert.strictEqual(stackSummary([]), "(no frames)");
  });
});

describe("Where a worker's file is on this machine", () => {
  const here = new Set(["/home/me/proj/train.py", "/home/me/proj/pkg/data.py", "/tmp/same/job.py", path.join("/mapped", "src", "train.py")]);
  const exists = (p: string) => here.has(p);

  it("maps by raySleuth.pathMappings first, as attach does", () => {
    const mappings = [{ localRoot: "/mapped", remoteRoot: "/home/ray/app/" }];
    assert.strictEqual(localPath("/home/ray/app/src/train.py", { mappings, folders: [], exists }), path.join("/mapped", "src", "train.py"));
  });

  it("takes a path that exists here as it is (a local cluster)", () => {
    assert.strictEqual(localPath("/tmp/same/job.py", { mappings: [], folders: ["/home/me/proj"], exists }), "/tmp/same/job.py");
  });

  it("takes the worker's working folder as a copy of a workspace folder", () => {
    const cwd = "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_abc";
    assert.strictEqual(localPath(`${cwd}/pkg/data.py`, { mappings: [], cwd, folders: ["/other", "/home/me/proj"], exists }), path.join("/home/me/proj", "pkg", "data.py"));
    assert.strictEqual(localPath(`${cwd}/pkg/missing.py`, { mappings: [], cwd, folders: ["/home/me/proj"], exists }), undefined);
  });

  it("is undefined for a file that is nowhere here", () => {
    assert.strictEqual(localPath("/srv/elsewhere.py", { mappings: [{ localRoot: "/mapped", remoteRoot: "/srv/x" }], folders: ["/home/me/proj"], exists }), undefined);
  });
});
