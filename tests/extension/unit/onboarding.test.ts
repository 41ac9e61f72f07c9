// Issue #13's remote broker and onboarding, the pure parts: which DAP address
// a session uses behind one tunnelled port, what a typed broker address means,
// the Doctor panel's text, and the manifest's walkthrough and empty-view texts.
import * as assert from "assert";
import * as fs from "fs";
import * as path from "path";
import { dapAddressFor, parseBrokerAddress } from "../../../extension/broker/remoteAddress";
import { Commands } from "../../../extension/constants";
import { DoctorReport, doctorHtml, doctorSummary } from "../../../extension/views/doctorReport";

const ROOT = path.resolve(__dirname, "../../..");

describe("remote broker address", () => {
  it("sends DAP to the HTTP address the editor knows when the broker takes it there", () => {
    const status = { dap: "127.0.0.1:40123", dap_on_http: true };
    assert.strictEqual(dapAddressFor("http://127.0.0.1:17311", status), "127.0.0.1:17311");
    assert.strictEqual(dapAddressFor("http://[::1]:17311", status), "[::1]:17311");
    assert.strictEqual(dapAddressFor("http://head.local", status), "head.local:80");
  });

  it("keeps the broker's own DAP address for a broker without dap_on_http", () => {
    assert.strictEqual(dapAddressFor("http://127.0.0.1:17311", { dap: "127.0.0.1:40123" }), "127.0.0.1:40123");
  });

  it("reads what people type as a broker address, and says what is missing", () => {
    assert.deepStrictEqual(parseBrokerAddress("127.0.0.1:7311"), { url: "http://127.0.0.1:7311" });
    assert.deepStrictEqual(parseBrokerAddress(" http://localhost:7311/ "), { url: "http://localhost:7311" });
    assert.match((parseBrokerAddress("http://localhost") as { error: string }).error, /port/);
    assert.match((parseBrokerAddress("ws://x:1") as { error: string }).error, /HTTP/);
    assert.match((parseBrokerAddress("") as { error: string }).error, /address/);
  });
});

describe("doctor report", () => {
  const report: DoctorReport = {
    ok: false,
    broker: [{ check: "ray", status: "ok", detail: "Ray 2.60.0" }],
    nodes: [
      {
        node_id: "3f2a9b00",
        node_ip: "10.0.0.2",
        checks: [
          { check: "py-spy", status: "fail", detail: "ptrace is not allowed", hint: "run with CAP_SYS_PTRACE" },
          { check: "agent", status: "warn", detail: "<off> in 1 worker", hint: "set RAYSLEUTH=1" },
        ],
      },
    ],
  };

  it("counts failures and warnings over the broker and every node", () => {
    assert.strictEqual(doctorSummary(report), "1 failed, 1 warning (3 checks)");
    assert.strictEqual(doctorSummary({ ok: true, broker: [{ check: "ray", status: "ok", detail: "" }] }), "all good (1 checks)");
  });

  it("shows each node's checks with their hints, escaped", () => {
    const html = doctorHtml(report, new Date(0));
    assert.match(html, /Node 10\.0\.0\.2 \(3f2a9b\)/);
    assert.match(html, /run with CAP_SYS_PTRACE/);
    assert.match(html, /&lt;off&gt; in 1 worker/);
    assert.doesNotMatch(html, /<script/);
  });
});

describe("package.json onboarding", () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
    contributes: {
      walkthroughs: { id: string; steps: { id: string; media: { markdown?: string }; completionEvents?: string[] }[] }[];
      viewsWelcome: { view: string; contents: string; when?: string }[];
      views: Record<string, { id: string }[]>;
      commands: { command: string }[];
    };
  };

  it("has a Getting Started walkthrough whose steps cover connect, attach, a rank breakpoint and a crash", () => {
    const steps = pkg.contributes.walkthroughs.find((w) => w.id === "raySleuth.gettingStarted")?.steps ?? [];
    assert.deepStrictEqual(steps.map((s) => s.id).slice(0, 4), ["connect", "attach", "rankBreakpoint", "crash"]);
    for (const s of steps) {
      assert.ok(s.media.markdown && fs.existsSync(path.join(ROOT, s.media.markdown)), `${s.id}: ${s.media.markdown} exists`);
      assert.ok(s.completionEvents?.length, `${s.id} has a completion event`);
    }
  });

  it("says what to do in every view while it is empty", () => {
    for (const view of Object.values(pkg.contributes.views).flat()) {
      assert.ok(pkg.contributes.viewsWelcome.some((w) => w.view === view.id && w.contents.trim()), `${view.id} has a welcome text`);
    }
  });

  it("declares the remote, doctor and walkthrough commands", () => {
    const ids = pkg.contributes.commands.map((c) => c.command);
    for (const id of [Commands.connectRemote, Commands.runDoctor, Commands.openWalkthrough]) {
      assert.ok(ids.includes(id), id);
    }
  });
});
