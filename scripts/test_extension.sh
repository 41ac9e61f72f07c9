#!/usr/bin/env bash
# Runs the extension tests inside a real VS Code (code-server + headless
# Chromium) against a real broker with real Ray workers (`raysleuth demo`).
# Prints `extension: N passed, N failed`; writes $RAYSLEUTH_RESULTS_DIR/extension.json
# when that is set. Every process it starts it ends, by id, whatever happens.
# After the extension-host and UI tests, the UI scenario of issue 13 (tests/extension/runner/
# uiScenario.ts: clicks and keys only, notifications on) runs in a code-server of its own
# against the packaged dist/raysleuth-<version>.vsix installed into it:
#   RAYSLEUTH_UI_SCENARIO=vsix (default) | dev (this folder as an installed extension) |
#     dev,vsix (both) | off;  RAYSLEUTH_SCENARIO_ONLY=1 runs only the scenario.
# Its screenshots land in tests/extension/out/scenario-<target>/ (ignored).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RAYSLEUTH_BIN="${RAYSLEUTH_BIN:-$ROOT/.venv/bin/raysleuth}"

RUN_DIR=""
STATE=""
DEMO_PID=""
DEMO_RC=0
finished=0

say() { echo "[test_extension] $*"; }

finish() { # passed failed skipped
  finished=1
  echo "extension: $1 passed, $2 failed"
  if [ -n "${RAYSLEUTH_RESULTS_DIR:-}" ]; then
    mkdir -p "$RAYSLEUTH_RESULTS_DIR"
    printf '{"passed":%d,"failed":%d,"skipped":%d}\n' "$1" "$2" "$3" >"$RAYSLEUTH_RESULTS_DIR/extension.json"
  fi
}

alive() { kill -0 "$1" 2>/dev/null; }

wait_gone() { # pid seconds
  local deadline=$((SECONDS + $2))
  while alive "$1" && ((SECONDS < deadline)); do sleep 0.2; done
  ! alive "$1"
}

stop_demo() {
  [ -n "$DEMO_PID" ] || return 0
  local broker_pid=""
  if [ -f "$STATE/broker.json" ]; then
    broker_pid="$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$STATE/broker.json" | head -1)"
  fi
  if alive "$DEMO_PID"; then
    say "stopping raysleuth demo (pid $DEMO_PID)"
    kill -TERM "$DEMO_PID" 2>/dev/null || true
    wait_gone "$DEMO_PID" 30 || { say "demo ignored SIGTERM; SIGKILL"; kill -KILL "$DEMO_PID" 2>/dev/null || true; }
  fi
  # The demo is a session leader (setsid): whatever of its session is left
  # (Ray workers run in their own process groups) ends here, by pid.
  local left deadline=$((SECONDS + 15))
  session_left() { ps -eo pid=,sid= | awk -v s="$DEMO_PID" '$2 == s && $1 != s {print $1}'; }
  # Ray's workers end on their own shortly after the demo: give them time.
  while [ -n "$(session_left)" ] && ((SECONDS < deadline)); do sleep 0.5; done
  left="$(session_left)"
  if [ -n "$broker_pid" ] && alive "$broker_pid"; then left="$left $broker_pid"; fi
  if [ -n "${left// /}" ]; then
    say "ending leftovers of the demo: $(echo $left)"
    kill -TERM $left 2>/dev/null || true
    sleep 2
    for p in $left; do alive "$p" && kill -KILL "$p" 2>/dev/null || true; done
  fi
  DEMO_RC=0  # 1 when Ray aborted a worker during the run (the demo names the check)
  wait "$DEMO_PID" 2>/dev/null || DEMO_RC=$?
  DEMO_PID=""
}

cleanup() {
  local rc=$?
  stop_demo
  if [ -n "$RUN_DIR" ] && [ -d "$RUN_DIR" ]; then
    if [ "${KEEP_RUN_DIR:-0}" = 1 ] || [ "$rc" != 0 ]; then
      [ -f "$RUN_DIR/demo.log" ] && { say "last lines of the demo's log:"; tail -15 "$RUN_DIR/demo.log"; }
      [ -f "$STATE/broker.log" ] && { say "the broker's log, warnings and breakpoint sets:"; grep -E "WARNING|ERROR|breakpoints|points" "$STATE/broker.log" | tail -40; }
      if [ "${KEEP_RUN_DIR:-0}" = 1 ]; then say "kept $RUN_DIR"; else rm -rf "$RUN_DIR"; fi
    else
      rm -rf "$RUN_DIR"
    fi
  fi
  ((finished)) || finish 0 1 0
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$SECONDS
bash scripts/setup_node.sh
# shellcheck disable=SC1091
source .cache/paths.env
say "setup took $((SECONDS - t0)) s"

if [ ! -x "$RAYSLEUTH_BIN" ]; then
  say "no $RAYSLEUTH_BIN: run scripts/setup.sh first (it creates .venv with the Python backend)"
  exit 1
fi

RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/raysleuth-ext.XXXXXX")"
# The demo's state dir is the default one (~/.raysleuth) of the home the new-user scenario runs
# with: a link there would be refused as a state dir (#37).
STATE="$RUN_DIR/home/.raysleuth"
mkdir -p "$STATE"

# As the Python tests do (tests/python/helpers.py, pin_ray_env): loopback only and an
# explicit auth mode. Unset, Ray turns token auth on by itself when ~/.ray/auth_token
# exists, and the test host (its own HOME) could not join the demo's cluster.
# Exported: the demo, the broker, code-server and the jobs the tests start all see them.
export RAY_AUTH_MODE=disabled RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
# The demo's rank 2 raises on purpose; VS Code watches the broker's stream, so by default it
# would be held 120 s for an attach, and the timing of the tests with it. The extension's
# tests open crash records as replays; the live hold is tested in tests/python/integration.
export RAYSLEUTH_POSTMORTEM_HOLD=0

# A new session, so the demo's pid is its session id and nothing it starts
# outlives cleanup(). `setsid` execs in place here (a background job of a
# script is not a process group leader), so $! is the demo itself.
say "starting raysleuth demo --state-dir $STATE --forever"
setsid "$RAYSLEUTH_BIN" demo --state-dir "$STATE" --forever >"$RUN_DIR/demo.log" 2>&1 </dev/null &
DEMO_PID=$!

set +e
NODE24_BIN="$NODE24_BIN" CODE_SERVER_ENTRY="$CODE_SERVER_ENTRY" \
  RAYSLEUTH_STATE_DIR="$STATE" RAYSLEUTH_RUN_DIR="$RUN_DIR" \
  RAYSLEUTH_EXT_SUMMARY="$RUN_DIR/summary.json" RAYSLEUTH_DEMO_PID="$DEMO_PID" \
  node dist/tests/runner/runTests.js
runner_rc=$?
set -e

if [ -f "$RUN_DIR/summary.json" ]; then
  read -r passed failed skipped < <(node -e '
    const s = require(process.argv[1]);
    console.log(s.passed, s.failed, s.skipped);' "$RUN_DIR/summary.json")
else
  passed=0 failed=1 skipped=0
fi
if [ "$runner_rc" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi
stop_demo
if [ "$DEMO_RC" = 1 ]; then
  say "Ray aborted a worker of the demo's cluster:"; grep "Ray aborted a worker" "$RUN_DIR/demo.log" >&2
  failed=$((failed + 1))
fi
say "total $((SECONDS - t0)) s"
finish "$passed" "$failed" "$skipped"
if [ "$failed" != 0 ] || [ "$passed" = 0 ]; then exit 1; fi
