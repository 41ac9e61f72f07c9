// code-server for the extension tests: its isolated dirs and settings, its process group (started
// and ended as a whole), the workbench URL that loads the extension under test, and the
// environment scripts/test_extension.sh hands the runner.
import { ChildProcess, spawn } from "child_process";
import * as fs from "fs";
import * as http from "http";
import * as path from "path";

export function env(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} must be set (scripts/test_extension.sh sets it)`);
  }
  return v;
}

export const ROOT = path.resolve(__dirname, "../../..");
export const NODE24 = env("NODE24_BIN");
export const CODE_SERVER = env("CODE_SERVER_ENTRY");
export const STATE_DIR = env("RAYSLEUTH_STATE_DIR");
/** The interpreter of the language server (raySleuth.pythonPath): the project's .venv unless told. */
export const PYTHON = process.env.RAYSLEUTH_PYTHON ?? path.join(ROOT, ".venv", "bin", "python");
export const RUN_DIR = env("RAYSLEUTH_RUN_DIR");

const t0 = Date.now();
export function say(msg: string): void {
  console.log(`[runTests +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
}

export function httpOk(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(url, (res) => {
      res.resume();
      resolve((res.statusCode ?? 500) < 500);
    });
    req.on("error", () => resolve(false));
    req.setTimeout(2000, () => req.destroy());
  });
}

/**
 * `asUser`: as a new user meets it (issue 25): no raySleuth setting at all (the demo's broker is
 * found through ~/.raysleuth, its state dir, the language server's interpreter through
 * broker.json) and Workspace Trust on, the folder opened in Restricted Mode.
 */
export function prepareDirs(base = RUN_DIR, asUser = false): Record<string, string> {
  const d = (name: string) => {
    const p = path.join(base, name);
    fs.mkdirSync(p, { recursive: true });
    return p;
  };
  const dirs = {
    userData: d("user-data"),
    extensions: d("extensions"),
    xdgConfig: d("xdg-config"),
    xdgData: d("xdg-data"),
    xdgCache: d("xdg-cache"),
    tmp: d("tmp"),
    home: d("home"),
    workspace: d("workspace"),
  };
  fs.mkdirSync(path.join(dirs.userData, "User"), { recursive: true });
  if (asUser) {
    // The demo's state dir is ~/.raysleuth of this home (scripts/test_extension.sh): a link to it
    // would be refused as a state dir, as another user's link would (#37).
    if (path.basename(STATE_DIR) !== ".raysleuth") {
      throw new Error(`RAYSLEUTH_STATE_DIR must end in .raysleuth: ${STATE_DIR}`);
    }
    dirs.home = path.dirname(STATE_DIR);
  }
  const ours = asUser
    ? { "security.workspace.trust.enabled": true, "security.workspace.trust.startupPrompt": "never" }
    : {
        "raySleuth.stateDir": STATE_DIR,
        "raySleuth.pythonPath": PYTHON, // the language server's interpreter: no Python extension here
        "security.workspace.trust.enabled": false,
      };
  fs.writeFileSync(
    path.join(dirs.userData, "User", "settings.json"),
    JSON.stringify(
      {
        ...ours,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": false,
        "telemetry.telemetryLevel": "off",
        "extensions.autoUpdate": false,
        "extensions.autoCheckUpdates": false,
        "update.mode": "none",
        "chat.disableAIFeatures": true,
        "workbench.welcomePage.walkthroughs.openOnInstall": false,
        "git.openRepositoryInParentFolders": "never", // its question would cover the scenario's notifications
      },
      null,
      2,
    ),
  );
  return dirs;
}

/** smokeDriver: the flag the extension-host tests need; it also hides every notification. */
export function startCodeServer(port: number, dirs: Record<string, string>, smokeDriver = true, trust = false): ChildProcess {
  const base = path.dirname(dirs.userData);
  const config = path.join(base, "code-server.yaml");
  fs.writeFileSync(config, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
  const logFile = path.join(base, "code-server.log");
  const log = fs.openSync(logFile, "w");
  const child = spawn(
    NODE24,
    [
      CODE_SERVER,
      "--config", config,
      "--bind-addr", `127.0.0.1:${port}`,
      "--auth", "none",
      "--user-data-dir", dirs.userData,
      "--extensions-dir", dirs.extensions,
      "--disable-telemetry",
      "--disable-update-check",
      ...(trust ? [] : ["--disable-workspace-trust"]),
      "--ignore-last-opened",
      ...(smokeDriver ? ["--vscode-option", "enable-smoke-test-driver"] : []),
      dirs.workspace,
    ],
    {
      detached: true, // its own process group: ended as a whole below
      stdio: ["ignore", log, log],
      env: {
        ...process.env,
        HOME: dirs.home,
        XDG_CONFIG_HOME: dirs.xdgConfig,
        XDG_DATA_HOME: dirs.xdgData,
        XDG_CACHE_HOME: dirs.xdgCache,
        TMPDIR: dirs.tmp,
        RAYSLEUTH_EXT_RESULTS: path.join(RUN_DIR, "ext-host-results.json"),
        RAYSLEUTH_TOKEN: "", // the test must find the token the way users do
      },
    },
  );
  say(`code-server pid ${child.pid} on port ${port}; log ${logFile}`);
  return child;
}

export async function stopGroup(child: ChildProcess | undefined, name: string): Promise<void> {
  if (!child?.pid) {
    return;
  }
  const pgid = child.pid;
  const gone = () => {
    try {
      process.kill(-pgid, 0);
      return false;
    } catch {
      return true;
    }
  };
  try {
    process.kill(-pgid, "SIGTERM");
  } catch {
    return;
  }
  const deadline = Date.now() + 10_000;
  while (!gone() && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!gone()) {
    say(`${name} did not stop on SIGTERM; SIGKILL`);
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

export function workbenchUrl(port: number, workspace: string, withTests: boolean): string {
  const authority = `127.0.0.1:${port}`;
  // Paths may hold spaces or non-ASCII letters (CI checks out anywhere): encode each segment.
  const uri = (p: string) => `vscode-remote://${authority}${p.split("/").map(encodeURIComponent).join("/")}`;
  const payload: [string, string][] = [["extensionDevelopmentPath", uri(ROOT)]];
  if (withTests) {
    payload.push(["extensionTestsPath", uri(path.join(ROOT, "dist/tests/suite/index.js"))]);
  }
  return `http://${authority}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(JSON.stringify(payload))}`;
}
