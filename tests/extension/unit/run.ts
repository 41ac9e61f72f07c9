// Runs the plain mocha tests of the extension's pure modules under Node (no
// VS Code, no Ray): every *.test.js next to this file. Prints a closing
// "extension-unit: N passed, N failed" line and, when RAYSLEUTH_RESULTS_DIR is
// set, writes extension-unit.json for scripts/test.sh's summary. Fails when no test ran.
import * as fs from "fs";
import * as path from "path";
import Mocha from "mocha";

const files = fs.readdirSync(__dirname).filter((f) => f.endsWith(".test.js")).sort();
const mocha = new Mocha({ ui: "bdd", timeout: 10_000, reporter: "spec", ...(process.env.RAYSLEUTH_UNIT_GREP ? { grep: process.env.RAYSLEUTH_UNIT_GREP } : {}) });
for (const f of files) {
  mocha.addFile(path.join(__dirname, f));
}
let passed = 0;
let failed = 0;
let skipped = 0;
const runner = mocha.run((failures) => {
  const resultsDir = process.env.RAYSLEUTH_RESULTS_DIR;
  if (resultsDir) {
    fs.mkdirSync(resultsDir, { recursive: true });
    fs.writeFileSync(path.join(resultsDir, "extension-unit.json"), JSON.stringify({ passed, failed, skipped }) + "\n");
  }
  console.log(`extension-unit: ${passed} passed, ${failed} failed, ${skipped} skipped`);
  process.exitCode = failures > 0 || passed === 0 ? 1 : 0;
});
runner.on("pass", () => passed++);
runner.on("fail", () => failed++);
runner.on("pending", () => skipped++);
