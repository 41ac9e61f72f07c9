// Text from the cluster made safe to show in the editor (#37): actor and task names, messages,
// paths, log lines and values come from code anyone with a job on the cluster writes. No
// character of theirs may reorder, hide or fake what a tree, a notification or an output
// channel shows: each is shown escaped, never dropped. Pure text, no vscode import; the same
// rules as python_backend/raysleuth/shared/textsafe.py.

/**
 * Characters never shown raw: controls (C0, DEL, C1), format characters (bidi embeddings,
 * overrides and isolates U+202A-202E / U+2066-2069, zero-width ones, tags), line and paragraph
 * separators, lone surrogates.
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function escapeChar(ch: string): string {
  const named = NAMED[ch];
  if (named) {
    return named;
  }
  const code = ch.codePointAt(0) ?? 0;
  const hex = code.toString(16);
  return code < 0x100 ? `\\x${hex.padStart(2, "0")}` : code < 0x10000 ? `\\u${hex.padStart(4, "0")}` : `\\U${hex.padStart(8, "0")}`;
}

/** `text` with every unsafe character escaped (`\x1b`, `\n`, `\u202e`) but those in `keep`. */
export function visible(text: unknown, keep = ""): string {
  const s = typeof text === "string" ? text : String(text);
  return s.replace(UNSAFE, (ch) => (keep.includes(ch) ? ch : escapeChar(ch)));
}

/** For a single-line field (a label, a description, a log line, a notification): no newline, no tab. */
export function oneLine(text: unknown): string {
  return visible(text);
}

/** For text of several lines (a tooltip, a stack): newlines and tabs stay, the rest is escaped. */
export function multiLine(text: unknown): string {
  return visible(text, "\n\t");
}

/** The texts of a tree item, as the Cluster, Stacks, Parallel Stacks and Collectives views show them. */
export interface TreeTexts {
  label: string;
  description?: string;
  tooltip?: string;
}

/** `item` with its label and description on one line and its tooltip's lines escaped. */
export function safeTreeTexts<T extends TreeTexts>(item: T): T {
  return {
    ...item,
    label: oneLine(item.label),
    ...(item.description === undefined ? {} : { description: oneLine(item.description) }),
    ...(item.tooltip === undefined ? {} : { tooltip: multiLine(item.tooltip) }),
  };
}

/**
 * Text for a MarkdownString (a tooltip): escaped as `multiLine`, and Markdown's own characters
 * backslashed so a name cannot make a link, an image or a heading.
 */
export function markdownText(text: unknown): string {
  return multiLine(text).replace(/[\\`*_{}[\]()#+\-.!|<>~]/g, "\\$&");
}
