// "Ray Sleuth: Run Doctor" (issue #13) in the real extension host: the demo's
// broker answers GET /v1/doctor and the report shows in a webview tab.
import * as assert from "assert";
import * as vscode from "vscode";
import type { RaySleuthApi } from "../../../extension/extension";
import { Commands } from "../../../extension/constants";
import { DoctorReport } from "../../../extension/views/doctorReport";
import { activateExtension, waitFor } from "./helpers";

describe("Run Doctor", function () {
  this.timeout(120_000);
  let api: RaySleuthApi;

  before(async () => {
    api = await activateExtension();
  });

  it("shows the broker's and every node's checks in a Doctor tab", async () => {
    const report = await vscode.commands.executeCommand<DoctorReport | undefined>(Commands.runDoctor);
    assert.ok(report, "the doctor ran");
    assert.ok((report.broker ?? []).length > 0, "the broker's checks");
    assert.ok((report.nodes ?? []).length > 0 && (report.nodes ?? []).every((n) => (n.checks ?? []).length > 0), "each node's checks");
    assert.strictEqual(api.doctor.last, report);
    // The tab list follows the panel a moment later.
    const tab = await waitFor("a Doctor tab", () =>
      vscode.window.tabGroups.all.flatMap((g) => g.tabs).find((t) => t.input instanceof vscode.TabInputWebview && t.label.includes("Doctor")),
    10_000);
    await vscode.window.tabGroups.close(tab);
  });
});
