// Issue #37, finding 2: the extension obeyed a planted broker.json. With raySleuth.stateDir on a
// folder another user controls (0777, files 0666 owned by nobody) it read the token from the
// token_file the file names and ran the file's "python"; in Restricted Mode the language server
// ran <workspace>/.venv/bin/python. Real files with real owners (chown to nobody: the tests run
// as root, and skip without it), the extension's own readers and the real interpreter probe (a
// fake "python" that leaves a mark when it runs). Plain mocha, no window, no Ray.
import * as assert from "assert";
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { locateBroker, readBrokerFile, readToken } from "../../../extension/broker/brokerLocator";
import { UntrustedFileError, checkStateDir } from "../../../extension/broker/fileTrust";
import { interpreterProblem, lspCandidates } from "../../../extension/common/interpreterTrust";
import { firstRunnable } from "../../../extension/lsp/interpreterProbe";

const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;

let root: string;

/** A fake interpreter: answers the probe as a Python 3.11 with raysleuth, and appends to `mark` when run. */
function fakePython(file: string, mark: string, mode = 0o755): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `#!/bin/sh\necho ran >> '${mark}'\necho '{"version": "3.11.4", "missing": []}'\n`, { mode });
  fs.chmodSync(file, mode);
  return file;
}

/** A state dir as a broker of ours leaves it: 0700, broker.json 0600, token 0600. */
function goodStateDir(dir: string, extra: Record<string, unknown> = {}, token = "the-right-token"): string {
  fs.mkdirSync(dir, { mode: 0o700 });
  fs.writeFileSync(path.join(dir, "token"), `${token}\n`, { mode: 0o600 });
  const info = { ready: true, http: "http://127.0.0.1:7311", dap: "127.0.0.1:7312", token_file: path.join(dir, "token"), pid: process.pid, ...extra };
  fs.writeFileSync(path.join(dir, "broker.json"), JSON.stringify(info), { mode: 0o600 });
  return dir;
}

function write(file: string, text: string, mode: number, uid?: number): string {
  fs.writeFileSync(file, text, { mode });
  fs.chmodSync(file, mode);
  if (uid !== undefined) {
    fs.chownSync(file, uid, uid);
  }
  return file;
}

function refusal(fn: () => unknown): UntrustedFileError {
  try {
    const got = fn();
    assert.fail(`expected a refusal, got ${JSON.stringify(got)}`);
  } catch (err) {
    assert.ok(err instanceof UntrustedFileError, `an UntrustedFileError, not ${String(err)}`);
    return err;
  }
}

const locate = (stateDir: string, more: { brokerAddress?: string; tokenFile?: string } = {}) =>
  locateBroker({ brokerAddress: more.brokerAddress ?? "", tokenFile: more.tokenFile ?? "", stateDir }, {});

describe("Files the extension obeys: only the user's own (issue #37, finding 2)", () => {
  before(function () {
    if (!isRoot) {
      this.skip(); // the planted files are chowned to nobody: that needs root
    }
    root = fs.mkdtempSync(path.join(os.tmpdir(), "rs-filetrust-"));
  });

  after(() => {
    if (root) {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it("refuses a state dir another user controls (0777, broker.json and token 0666 of nobody)", () => {
    const pub = path.join(root, "pub");
    fs.mkdirSync(pub);
    fs.chmodSync(pub, 0o777);
    fs.chownSync(pub, NOBODY, NOBODY);
    const mark = path.join(root, "planted-ran");
    const evil = fakePython(path.join(pub, "python"), mark, 0o777);
    fs.chownSync(evil, NOBODY, NOBODY);
    write(path.join(pub, "planted-token"), "planted\n", 0o666, NOBODY);
    write(path.join(pub, "token"), "planted\n", 0o666, NOBODY);
    write(
      path.join(pub, "broker.json"),
      JSON.stringify({ ready: true, http: "http://127.0.0.1:7311", token_file: path.join(pub, "planted-token"), python: evil }),
      0o666,
      NOBODY,
    );
    const err = refusal(() => locate(pub));
    assert.match(err.message, new RegExp(`^The state dir ${pub} belongs to uid 65534, not to you \\(uid 0\\)`));
    assert.match(err.hint, /raySleuth\.stateDir/);
    refusal(() => readBrokerFile(pub)); // what hands the language server broker.json's "python"
    assert.ok(!fs.existsSync(mark));
  });

  it("refuses a state dir of ours that others can write, and a broker.json of nobody's or 0666 in ours", () => {
    const open = goodStateDir(path.join(root, "open"));
    fs.chmodSync(open, 0o777);
    assert.match(refusal(() => locate(open)).message, /Others can write the state dir .* \(drwxrwxrwx\): a broker\.json planted there/);

    const planted = goodStateDir(path.join(root, "planted-file"));
    fs.chownSync(path.join(planted, "broker.json"), NOBODY, NOBODY);
    assert.match(refusal(() => locate(planted)).message, /The broker file .*broker\.json \(-rw-------, uid 65534\) is not a plain file of yours/);

    const writable = goodStateDir(path.join(root, "writable-file"));
    fs.chmodSync(path.join(writable, "broker.json"), 0o666);
    assert.match(refusal(() => locate(writable)).message, /\(-rw-rw-rw-, uid 0\) is not a plain file of yours that only you can write/);
  });

  it("refuses a symlinked state dir, and a broker.json that is a link", () => {
    const real = goodStateDir(path.join(root, "real"));
    const link = path.join(root, "link");
    fs.symlinkSync(real, link);
    assert.match(refusal(() => locate(link)).message, new RegExp(`^The state dir ${link} is a symbolic link \\(to ${real}\\)`));
    assert.strictEqual(checkStateDir(real), "ok");

    const linked = goodStateDir(path.join(root, "linked-file"));
    fs.rmSync(path.join(linked, "broker.json"));
    fs.symlinkSync(path.join(real, "broker.json"), path.join(linked, "broker.json"));
    assert.match(refusal(() => locate(linked)).message, /broker\.json is a symbolic link/);
  });

  it("takes the token from the state dir's own token file, never from the token_file broker.json names", () => {
    const other = write(path.join(root, "other-token"), "the-wrong-token\n", 0o600);
    const dir = goodStateDir(path.join(root, "named-elsewhere"), { token_file: other });
    const found = locate(dir);
    assert.strictEqual(found.token, "the-right-token");
    assert.strictEqual(found.url, "http://127.0.0.1:7311");
    // With raySleuth.brokerAddress and no token file: the state dir's token too.
    assert.strictEqual(locate(dir, { brokerAddress: "http://127.0.0.1:9" }).token, "the-right-token");
  });

  it("refuses a token file (the state dir's, or raySleuth.tokenFile) others can read, of nobody, a link or a FIFO", () => {
    const dir = goodStateDir(path.join(root, "loose-token"));
    fs.chmodSync(path.join(dir, "token"), 0o644);
    assert.match(refusal(() => locate(dir)).message, /token \(-rw-r--r--, uid 0\) is not a plain file of yours that only you can read/);

    const good = write(path.join(root, "setting-token"), "s3cret\n", 0o600);
    assert.strictEqual(readToken(good), "s3cret");
    const theirs = write(path.join(root, "their-token"), "s3cret\n", 0o600, NOBODY);
    assert.match(refusal(() => locate(root, { brokerAddress: "http://127.0.0.1:9", tokenFile: theirs })).message, /uid 65534\) is not a plain file of yours/);
    const link = path.join(root, "token-link");
    fs.symlinkSync(good, link);
    assert.match(refusal(() => readToken(link)).message, /token-link is a symbolic link/);
    const fifo = path.join(root, "token-fifo");
    execFileSync("mkfifo", ["-m", "600", fifo]);
    assert.match(refusal(() => readToken(fifo)).message, /\(-rw-------, uid 0\) is not a plain file/, "refused at once, not read (it would block)");
  });

  it("runs broker.json's python only when no other user can have put it there", async () => {
    const mark = path.join(root, "broker-python-ran");
    const okMark = path.join(root, "path-python-ran");
    const shared = path.join(root, "shared-bin");
    fs.mkdirSync(shared);
    fs.chmodSync(shared, 0o777); // a folder anyone can write (no sticky bit)
    const inShared = fakePython(path.join(shared, "python"), mark);
    const theirsDir = path.join(root, "their-bin");
    const theirs = fakePython(path.join(theirsDir, "python"), mark);
    fs.chownSync(theirs, NOBODY, NOBODY);
    const fallback = { python: fakePython(path.join(root, "bin", "python3"), okMark), source: "python3 on PATH" };

    for (const python of [inShared, theirs]) {
      const dir = goodStateDir(path.join(root, `sd-${path.basename(path.dirname(python))}`), { python });
      const brokerPython = readBrokerFile(dir)?.python ?? undefined; // the file itself is ours and passes
      assert.strictEqual(brokerPython, python);
      const { candidates, refused } = lspCandidates(undefined, brokerPython, [fallback], undefined);
      assert.deepStrictEqual(
        candidates.map((c) => c.python),
        [fallback.python],
      );
      assert.match(refused[0], /the broker's interpreter, from broker\.json ".*" is not run: (others can write .*shared-bin|.*python belongs to uid 65534)/);
      const { chosen } = await firstRunnable(candidates);
      assert.strictEqual(chosen?.python, fallback.python);
    }
    assert.ok(!fs.existsSync(mark), "the planted interpreter never ran");
    assert.ok(fs.existsSync(okMark), "the probe runs what it is given (the mark works)");

    const mine = fakePython(path.join(root, "venv", "bin", "python"), mark);
    assert.strictEqual(interpreterProblem(mine), undefined);
    assert.deepStrictEqual(
      lspCandidates(undefined, mine, [fallback], undefined).candidates.map((c) => c.python),
      [mine, fallback.python],
    );
  });

  it("in Restricted Mode runs no interpreter inside a workspace folder, whoever names it", async () => {
    const ws = path.join(root, "untrusted-folder");
    const mark = path.join(root, "workspace-python-ran");
    const venvPython = fakePython(path.join(ws, ".venv", "bin", "python"), mark);
    const fallback = { python: fakePython(path.join(root, "bin2", "python3"), path.join(root, "bin2-ran")), source: "python3 on PATH" };
    const dir = goodStateDir(path.join(root, "sd-venv"), { python: venvPython });
    const brokerPython = readBrokerFile(dir)?.python ?? undefined;

    const restricted = lspCandidates(undefined, brokerPython, [fallback], [ws]);
    assert.deepStrictEqual(
      restricted.candidates.map((c) => c.python),
      [fallback.python],
    );
    assert.match(restricted.refused[0], /is not run: it is inside the workspace folder .*untrusted-folder, which is not trusted \(Restricted Mode\)/);
    // raySleuth.pythonPath pointing into the folder (a user setting) is refused too; a link out of it as well.
    const configured = { python: venvPython, source: "setting raySleuth.pythonPath" };
    assert.deepStrictEqual(lspCandidates(configured, undefined, [fallback], [ws]).candidates, []);
    const link = path.join(root, "python-link");
    fs.symlinkSync(venvPython, link);
    assert.deepStrictEqual(lspCandidates({ python: link, source: "setting raySleuth.pythonPath" }, undefined, [], [ws]).candidates, []);
    // A name on PATH that resolves into the folder.
    assert.deepStrictEqual(lspCandidates(undefined, undefined, [{ python: "python", source: "PATH" }], [ws], { PATH: path.join(ws, ".venv", "bin") }).candidates, []);

    const { chosen } = await firstRunnable(restricted.candidates);
    assert.strictEqual(chosen?.python, fallback.python);
    assert.ok(!fs.existsSync(mark), "the folder's interpreter never ran");
    // Trusted, the same folder's interpreter may run.
    assert.strictEqual(lspCandidates(undefined, brokerPython, [fallback], undefined).candidates[0].python, venvPython);
  });
});
