// Mocha entry that VS Code's extension host loads (extensionTestsPath). Runs
// every *.test.js next to it and writes the outcome as JSON for the runner,
// which cannot see this process's console. Fails when no test ran.
import * as fs from "fs";
import * as path from "path";
import Mocha from "mocha";

interface TestOutcome {
  title: string;
  state: "passed" | "failed" | "pending";
  durationMs?: number;
  error?: string;
}

export function run(): Promise<void> {
  const resultsFile = process.env.RAYSLEUTH_EXT_RESULTS ?? path.resolve(__dirname, "../../../tests/extension/out/results.json");
  // RAYSLEUTH_EXT_GREP=Crashes runs only the tests whose full title matches (while developing).
  const grep = process.env.RAYSLEUTH_EXT_GREP;
  const mocha = new Mocha({ ui: "bdd", timeout: 60_000, color: false, reporter: "dot", ...(grep ? { grep } : {}) });
  // By their numbers (1_cluster before 11_lsp), not as text.
  const files = fs.readdirSync(__dirname).filter((f) => f.endsWith(".test.js")).sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
  for (const f of files) {
    mocha.addFile(path.join(__dirname, f));
  }
  const outcomes: TestOutcome[] = [];
  const write = (extra: Record<string, unknown> = {}) => {
    fs.mkdirSync(path.dirname(resultsFile), { recursive: true });
    const count = (s: TestOutcome["state"]) => outcomes.filter((o) => o.state === s).length;
    fs.writeFileSync(
      resultsFile,
      JSON.stringify({ files, passed: count("passed"), failed: count("failed"), skipped: count("pending"), tests: outcomes, ...extra }, null, 2),
    );
  };
  return new Promise<void>((resolve, reject) => {
    try {
      const runner = mocha.run((failures) => {
        write();
        if (files.length === 0 || outcomes.length === 0) {
          reject(new Error(`No extension tests ran (looked for *.test.js in ${__dirname}).`));
        } else if (failures > 0) {
          reject(new Error(`${failures} extension test(s) failed.`));
        } else {
          resolve();
        }
      });
      runner.on("pass", (t) => outcomes.push({ title: t.fullTitle(), state: "passed", durationMs: t.duration }));
      runner.on("fail", (t, err: Error) => outcomes.push({ title: t.fullTitle(), state: "failed", error: err.stack ?? String(err) }));
      runner.on("pending", (t) => outcomes.push({ title: t.fullTitle(), state: "pending" }));
    } catch (err) {
      write({ crash: String(err) });
      reject(err instanceof Error ? err : new Error(String(err)));
    }
  });
}
