// The rank-list grammar shared by the scope prefixes, the rank pickers and the
// cluster commands: "0,2-3" ⇄ [0, 2, 3]. Pure text, no vscode import.

/** "0,2-3" → [0, 2, 3]; undefined when the text is not a list of ranks and ranges. */
export function parseRanks(text: string): number[] | undefined {
  const out = new Set<number>();
  for (const part of text.replace(/\s+/g, "").split(",")) {
    if (!part) {
      continue;
    }
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) {
      return undefined;
    }
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo || hi - lo > 1 << 16) {
      return undefined;
    }
    for (let r = lo; r <= hi; r++) {
      out.add(r);
    }
  }
  return out.size ? [...out].sort((a, b) => a - b) : undefined;
}

/** [3, 0, 2] → "0,2-3" (sorted, runs as ranges, duplicates dropped). */
export function formatRanks(ranks: readonly number[]): string {
  const items = [...new Set(ranks)].sort((a, b) => a - b);
  const runs: string[] = [];
  for (let i = 0; i < items.length; ) {
    let j = i;
    while (j + 1 < items.length && items[j + 1] === items[j] + 1) {
      j++;
    }
    runs.push(i === j ? String(items[i]) : `${items[i]}-${items[j]}`);
    i = j + 1;
  }
  return runs.join(",");
}
