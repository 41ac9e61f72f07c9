// The extension's rooms and the direction of their imports (views → services →
// client), read from the sources: a module that breaks them fails here, with
// the import that does. Plain mocha, no window.
import * as assert from "assert";
import * as fs from "fs";
import * as path from "path";

const SRC = path.resolve(__dirname, "../../../extension");

/** extension-relative path without ".ts" → the extension-relative modules it imports. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(full);
      } else if (entry.name.endsWith(".ts")) {
        const text = fs.readFileSync(full, "utf8");
        const specs = [...text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)"/gm)].map((m) => m[1]);
        const from = path.relative(SRC, full).replace(/\.ts$/, "");
        graph.set(
          from,
          specs.map((s) => (s.startsWith(".") ? path.relative(SRC, path.resolve(path.dirname(full), s)) : s)),
        );
      }
    }
  };
  walk(SRC);
  return graph;
}

const graph = importGraph();
const room = (mod: string) => (mod.includes("/") ? mod.split("/")[0] : "(top)");

/** Modules with no vscode import: they run under plain mocha (and are tested there). */
const PURE = [
  "broker/brokerClient",
  "broker/brokerErrors",
  "broker/brokerWire",
  "broker/brokerLocator",
  "broker/brokerProcess",
  "broker/types",
  "broker/wire",
  "broker/telemetryTypes",
  "broker/stacksTypes",
  "broker/telemetryClient",
  "broker/peerCheck",
  "broker/brokerHttp",
  "broker/fileTrust",
  "broker/tickets",
  "common/interpreterTrust",
  "debug/brokerDapAdapter",
  "common/ranks",
  "common/text",
  "common/textSafe",
  "cluster/statusText",
  "cluster/workerGrouping",
  "debug/attachConfig",
  "debug/clusterSessionAdapter",
  "debug/pauseTracker",
  "breakpoints/annotations",
  "breakpoints/controlReport",
  "breakpoints/logpointText",
  "breakpoints/rankScope",
  "views/html",
  "views/logFollower",
  "views/resultTables",
  "views/stackTree",
  "views/libraryFrames",
  "views/tensorTable",
  "views/tensorHtml",
  "views/gpuSeries",
  "views/timelineModel",
  "views/caseModel",
  "views/parallelTree",
  "views/perfettoTrace",
  "views/chartHtml",
  "webview/protocol",
  "lsp/protocol",
  "lsp/interpreterProbe",
];

/** What each room may import from the others: views → services → client, never back. */
const MAY_IMPORT: Record<string, string[]> = {
  common: ["common", "(top)"],
  broker: ["broker", "common", "(top)"],
  cluster: ["cluster", "broker", "common", "(top)"],
  debug: ["debug", "cluster", "broker", "common", "(top)"],
  breakpoints: ["breakpoints", "debug", "cluster", "broker", "common", "(top)"],
  views: ["views", "breakpoints", "debug", "cluster", "broker", "common", "webview", "(top)"],
  // The chart webviews run in the browser: they import nothing of the extension host (views
  // import their protocol.ts, types only).
  webview: ["webview"],
  // The language client: what it needs of the views and services (reveal, breakpoint take-over)
  // reaches it as hooks from extension.ts, so it imports none of them and none imports it.
  lsp: ["lsp", "common", "(top)"],
};

/** Views: only services.ts builds them; no service holds one. */
const VIEWS = [
  "cluster/workerTreeProvider",
  "cluster/statusBar",
  "breakpoints/breakpointDecorations",
  "views/crashesView",
  "views/evaluatePanel",
  "views/snapshotPanel",
  "views/stacksView",
  "views/comparePanel",
  "views/inspectPanel",
  "views/gpuPanel",
  "views/timelinePanel",
  "views/casesView",
  "views/parallelStacksView",
];

describe("Extension rooms", () => {
  it("finds the sources", () => {
    assert.ok(graph.size > 20, `${graph.size} modules under ${SRC}`);
    assert.ok(graph.has("extension"));
  });

  it("keeps the pure modules free of vscode (plain mocha runs them)", () => {
    for (const mod of PURE) {
      const imports = graph.get(mod);
      assert.ok(imports, `${mod}.ts exists`);
      assert.ok(!imports.includes("vscode"), `${mod}.ts imports vscode`);
      for (const dep of imports.filter((d) => graph.has(d))) {
        assert.ok(PURE.includes(dep) || dep === "constants", `${mod}.ts (pure) imports ${dep}.ts, which is not pure`);
      }
    }
  });

  it("points every import from views to services to the client, never back", () => {
    const wrong: string[] = [];
    for (const [mod, imports] of graph) {
      const allowed = MAY_IMPORT[room(mod)];
      if (!allowed) {
        continue; // extension.ts, services.ts and constants.ts
      }
      for (const dep of imports.filter((d) => graph.has(d))) {
        if (!allowed.includes(room(dep)) || dep === "extension") {
          wrong.push(`${mod} → ${dep}`);
        }
      }
    }
    assert.deepStrictEqual(wrong, []);
  });

  it("builds the views only in services.ts, the one place that builds everything", () => {
    const wrong: string[] = [];
    for (const [mod, imports] of graph) {
      for (const dep of imports) {
        if (VIEWS.includes(dep) && mod !== "services") {
          wrong.push(`${mod} → ${dep}`);
        }
      }
    }
    assert.deepStrictEqual(wrong, []);
  });

  it("keeps the chart webviews' code apart: uPlot and their own modules, nothing of the extension host", () => {
    const wrong: string[] = [];
    for (const [mod, imports] of graph) {
      if (room(mod) === "webview") {
        wrong.push(...imports.filter((d) => !d.startsWith("webview/") && !/^uplot(\/|$)/.test(d)).map((d) => `${mod} → ${d}`));
      }
    }
    assert.ok(graph.has("webview/charts"), "extension/webview/charts.ts exists");
    assert.deepStrictEqual(wrong, []);
  });

  it("has no import cycle", () => {
    const state = new Map<string, "open" | "done">();
    const cycles: string[] = [];
    const visit = (mod: string, stack: string[]) => {
      if (state.get(mod) === "done") {
        return;
      }
      if (state.get(mod) === "open") {
        cycles.push([...stack.slice(stack.indexOf(mod)), mod].join(" → "));
        return;
      }
      state.set(mod, "open");
      for (const dep of (graph.get(mod) ?? []).filter((d) => graph.has(d))) {
        visit(dep, [...stack, mod]);
      }
      state.set(mod, "done");
    };
    for (const mod of graph.keys()) {
      visit(mod, []);
    }
    assert.deepStrictEqual(cycles, []);
  });

  it("keeps every module at 400 lines or fewer", () => {
    const big = [...graph.keys()]
      .map((mod) => [mod, fs.readFileSync(path.join(SRC, `${mod}.ts`), "utf8").split("\n").length] as const)
      .filter(([, lines]) => lines > 400)
      .map(([mod, lines]) => `${mod}: ${lines} lines`);
    assert.deepStrictEqual(big, []);
  });
});
