// Small wording helpers shared by the views. Pure text, no vscode import.

/** "1 crash record", "2 crash records"; `plural` for words that do not take an "s" (crash → crashes). */
export function counted(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}
