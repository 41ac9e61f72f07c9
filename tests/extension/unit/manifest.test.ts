// package.json as VS Code reads it (issue #13): Python breakpoints without the
// Python extension, palette titles that do not steal each other's words, and
// every command, setting and menu id the code names. Plain mocha, no window.
import * as assert from "assert";
import * as fs from "fs";
import * as path from "path";
import { Commands, SETTINGS_SECTION, Settings } from "../../../extension/constants";

interface Command {
  command: string;
  title: string;
  category?: string;
}

const pkg = JSON.parse(fs.readFileSync(path.resolve(__dirname, "../../../package.json"), "utf8")) as {
  contributes: {
    breakpoints?: { language: string }[];
    commands: Command[];
    menus: Record<string, { command: string; when?: string }[]>;
    configuration: { properties: Record<string, unknown> };
  };
};
const commands = pkg.contributes.commands;

/** The command palette's word filter, as VS Code's (matchesWords): every typed word starts a word of the label, in order. */
function paletteMatches(typed: string, label: string): boolean {
  const words = label.toLowerCase().split(/[^a-z0-9]+/).filter(Boolean);
  let i = 0;
  for (const w of typed.toLowerCase().split(/\s+/).filter(Boolean)) {
    while (i < words.length && !words[i].startsWith(w)) {
      i++;
    }
    if (i === words.length) {
      return false;
    }
    i++;
  }
  return true;
}

describe("package.json", () => {
  it("contributes breakpoints for Python, so gutter clicks and F9 work without the Python extension", () => {
    assert.ok(
      (pkg.contributes.breakpoints ?? []).some((b) => b.language === "python"),
      `contributes.breakpoints: ${JSON.stringify(pkg.contributes.breakpoints)}`,
    );
  });

  it("lets 'Pause Rank' in the palette find Pause Rank… and no other command", () => {
    const hidden = new Set((pkg.contributes.menus.commandPalette ?? []).filter((m) => m.when === "false").map((m) => m.command));
    const hits = commands.filter((c) => !hidden.has(c.command) && paletteMatches("Pause Rank", `${c.category ?? ""}: ${c.title}`)).map((c) => c.command);
    assert.deepStrictEqual(hits, [Commands.pauseRank]);
    // The filter itself: the old title of evaluateAll was the one that matched too.
    assert.ok(paletteMatches("Pause Rank", "Ray Sleuth: Evaluate on All Paused Ranks…"));
  });

  it("says Capture Here is one-shot", () => {
    const capture = commands.find((c) => c.command === Commands.captureHere);
    assert.match(capture?.title ?? "", /\bOnce\b/);
  });

  it("declares every command the code names, and every setting", () => {
    const declared = new Set(commands.map((c) => c.command));
    const builtIn = (id: string) => id.endsWith(".focus");
    const missing = Object.values(Commands).filter((id) => !builtIn(id) && !declared.has(id));
    assert.deepStrictEqual(missing, []);
    const props = pkg.contributes.configuration.properties;
    const unset = Object.values(Settings).filter((s) => !(`${SETTINGS_SECTION}.${s}` in props));
    assert.deepStrictEqual(unset, []);
  });

  it("offers Compare Across Ranks on a Python selection, GPU memory on a node or worker, the Perfetto export on the timeline", () => {
    const menus = pkg.contributes.menus;
    const compare = menus["editor/context"].find((m) => m.command === Commands.compareAcrossRanks);
    assert.match(compare?.when ?? "", /editorLangId == python && editorHasSelection/);
    const gpu = menus["view/item/context"].find((m) => m.command === Commands.showGpuMemory);
    assert.ok(gpu && /view == raySleuth\.workers/.test(gpu.when ?? ""), JSON.stringify(gpu));
    const contextRe = /viewItem =~ \/(.*)\//.exec(gpu.when ?? "")?.[1] ?? "";
    for (const item of ["node.alive", "worker.running", "worker.crashed"]) {
      assert.match(item, new RegExp(contextRe), `${item} gets the menu entry`);
    }
    assert.match(menus["editor/title"].find((m) => m.command === Commands.exportPerfetto)?.when ?? "", /activeWebviewPanelId == 'raySleuth\.timeline'/);
    for (const id of [Commands.compareAcrossRanks, Commands.showInspectTable, Commands.showGpuMemory, Commands.showTimeline, Commands.exportPerfetto]) {
      const c = commands.find((x) => x.command === id);
      assert.strictEqual(`${c?.category}: ${c?.title}`.startsWith("Ray Sleuth: "), true, id);
    }
  });

  it("offers a worker's output and errors in the Cluster view's context menu", () => {
    const menu = pkg.contributes.menus["view/item/context"];
    for (const id of [Commands.showWorkerOutput, Commands.showWorkerErrors]) {
      const entry = menu.find((m) => m.command === id);
      assert.ok(entry, `${id} in view/item/context`);
      assert.match(entry.when ?? "", /view == raySleuth\.workers/);
    }
  });
});
