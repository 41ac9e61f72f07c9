// Library frames in the Stacks view (issue #38): a run of two or more frames of verl's
// dispatch wrappers, Ray's executor or the standard library in a group's stack is folded
// into one "N library frames" node that opens to them, as `raysleuth stacks` folds them.
// Pure, no vscode import.

/** What folding needs of a frame node (the Stacks view's StackFrameNode). */
export interface FoldableFrame {
  kind: "frame";
  id: string;
  groupId: string;
  library: boolean;
  /** The folded run it is shown in, if any. */
  runId?: string;
  frame: { function: string; path: string; line: number };
}

/** Two or more library frames in a row (verl's wrappers, Ray's executor), folded: "5 library frames", opening to them. */
export interface LibraryRun<F extends FoldableFrame = FoldableFrame> {
  kind: "library";
  id: string;
  groupId: string;
  label: string;
  /** Their functions: "inner, inner, func, _resume_span, …". */
  description: string;
  tooltip: string;
  frames: F[];
}

/** Library frames a folded run names before "…". */
const RUN_NAMES = 4;

/**
 * The frames as the group opens to them: each run of two or more library frames
 * after the innermost frame (where the worker stands) folded into one node, as
 * `raysleuth stacks` folds them; a stack with no frame of the user's stays whole.
 */
export function foldLibraryRuns<F extends FoldableFrame>(frames: F[]): (F | LibraryRun<F>)[] {
  if (frames.every((f) => f.library)) {
    return frames;
  }
  const out: (F | LibraryRun<F>)[] = frames.slice(0, 1);
  let run: F[] = [];
  const flush = () => {
    if (run.length > 1) {
      const id = `${run[0].id}:library`;
      const names = run.slice(0, RUN_NAMES).map((f) => f.frame.function);
      const folded = run.map((f) => ({ ...f, runId: id }));
      out.push({
        kind: "library",
        id,
        groupId: run[0].groupId,
        label: `${run.length} library frames`,
        description: names.join(", ") + (run.length > RUN_NAMES ? ", …" : ""),
        tooltip: run.map((f) => `${f.frame.function} — ${f.frame.path}:${f.frame.line}`).join("\n"),
        frames: folded,
      });
    } else {
      out.push(...run);
    }
    run = [];
  };
  for (const f of frames.slice(1)) {
    if (f.library) {
      run.push(f);
      continue;
    }
    flush();
    out.push(f);
  }
  flush();
  return out;
}

