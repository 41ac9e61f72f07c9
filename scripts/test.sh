#!/usr/bin/env bash
# The test front door: sets everything up, then runs every test kind one after another
# (lint, Python unit, integration on a real Ray cluster, token-auth cluster, multi-node cluster,
# the version matrix and the framework suite, extension tests inside a real VS Code) and ends
# with the time of each step and one closing summary line.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# .venv with the frameworks too (Ray Data, Train, Tune, Serve, CPU torch): the integration
# suite's Ray Data tests need them as much as the framework suite does.
"$ROOT/scripts/setup.sh" main frameworks || exit 1

RESULTS="$(mktemp -d /tmp/rs-results.XXXXXX)"
export RAYSLEUTH_RESULTS_DIR="$RESULTS"
PY="$ROOT/.venv/bin/python"
failed_steps=()
t0=$(date +%s)

step_name=""; step_t=$t0; timings=()
step() {  # closes the step before (its duration goes in the summary) and opens the next
  local now; now=$(date +%s)
  [ -z "$step_name" ] || timings+=("$step_name: $((now - step_t)) s")
  step_name="$1"; step_t=$now
  echo; echo "=== $1 ($((now - t0)) s) ==="
}

step "lint: ruff"
"$ROOT/.venv/bin/ruff" check python_backend tests bench || failed_steps+=(ruff)

step "types: mypy over python_backend"
(cd "$ROOT/python_backend" && "$ROOT/.venv/bin/mypy" raysleuth) || failed_steps+=(mypy)

# Each suite runs in its own pytest process, one at a time: each owns one Ray cluster.
for suite in unit integration auth multinode; do
  step "python: $suite"
  "$PY" -m pytest -c tests/python/pytest.ini "tests/python/$suite" -q -rs \
      --junitxml="$RESULTS/py-$suite.xml"
  rc=$?
  [ $rc -eq 0 ] || failed_steps+=("python-$suite")
done

# The version matrix (README): the integration suite on Python 3.12 too (the sys.monitoring
# trigger end to end), a smoke subset (`-m smoke`: discovery, attach, a cluster breakpoint, a
# post-mortem) on Python 3.13 and on the oldest Ray the package accepts, and the framework suite
# (Ray Train, Tune, Serve, verl 0.9.1's single controller) on 3.11. Each sets up its own virtualenv
# first (scripts/setup.sh PART, skipped when done), so its first run takes a few minutes more.
matrix_suite() {  # NAME SETUP_PART VENV PYTEST_ARGS...
  local name="$1" part="$2" venv="$3"; shift 3
  step "python: $name"
  if ! "$ROOT/scripts/setup.sh" "$part"; then
    failed_steps+=("python-$name-setup")
    return
  fi
  "$venv/bin/python" -m pytest -c tests/python/pytest.ini "$@" -q -rs \
      --junitxml="$RESULTS/py-$name.xml" || failed_steps+=("python-$name")
}

# The whole unit suite on 3.12 too: the trigger's sys.monitoring backend has tests of its own.
matrix_suite unit-py312 py312 "$ROOT/.venv312" tests/python/unit
matrix_suite integration-py312 py312 "$ROOT/.venv312" tests/python/integration
matrix_suite smoke-py313 py313 "$ROOT/.cache/venv313" tests/python/integration -m smoke
matrix_suite smoke-raymin ray-min "$ROOT/.cache/venv-raymin" tests/python/integration -m smoke
matrix_suite frameworks frameworks "$ROOT/.venv" tests/python/frameworks

# The demo front door as a new user meets it: scripts/demo.sh makes its own virtualenv from
# nothing (a package only the test set-up installs would hide a missing dependency), runs, and
# must exit 0 with rank 2's staged crash and no other failure.
step "demo: scripts/demo.sh in a virtualenv it makes itself"
demo_venv="$ROOT/.cache/venv-demo"
rm -rf "$demo_venv"
demo_state="$(mktemp -d /tmp/rs-demo-state.XXXXXX)"
if RAYSLEUTH_VENV="$demo_venv" RAYSLEUTH_SKIP_EXTENSION_BUILD=1 "$ROOT/scripts/demo.sh" --steps 45 \
    --state-dir "$demo_state" >"$RESULTS/demo.log" 2>&1 \
    && grep -q "step 40: rank 2 failed: FloatingPointError" "$RESULTS/demo.log" \
    && grep -q "case (divergence): rank 2 diverged .*(step 30)" "$RESULTS/demo.log" \
    && [ "$(grep -c "failed:" "$RESULTS/demo.log")" = 1 ]; then
  echo "demo: exit 0, only rank 2's staged crash, and the divergence case naming rank 2 at step 30"
else
  tail -30 "$RESULTS/demo.log"
  failed_steps+=(demo)
fi
rm -rf "$demo_state"  # the demo's broker has exited: nothing of the step is left in /tmp

step "extension: plain mocha (pure modules, no VS Code, no Ray)"
# npm packages first (setup_node.sh: npm ci and the build, each skipped when done already).
if bash "$ROOT/scripts/setup_node.sh"; then
  npm run --silent test:unit || failed_steps+=(extension-unit)
else
  failed_steps+=(extension-setup)
fi

step "extension: inside a real VS Code (code-server)"
"$ROOT/scripts/test_extension.sh" || failed_steps+=(extension)

step "summary"
printf '  step time: %s\n' "${timings[@]}"
"$PY" - "$RESULTS" "${failed_steps[@]+"${failed_steps[@]}"}" <<'PY'
import json, pathlib, sys
import xml.etree.ElementTree as ET
res = pathlib.Path(sys.argv[1]); failed_steps = sys.argv[2:]
passed = failed = skipped = 0
for xml in sorted(res.glob("py-*.xml")):
    root = ET.parse(xml).getroot()
    for s in (root.iter("testsuite")):
        t, f, e, sk = (int(s.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
        passed += t - f - e - sk; failed += f + e; skipped += sk
        print(f"  {xml.stem[3:]:18} {t - f - e - sk} passed, {f + e} failed, {sk} skipped")
for name in ("extension-unit", "extension"):
    ext = res / f"{name}.json"
    if ext.exists():
        d = json.loads(ext.read_text())
        passed += d["passed"]; failed += d["failed"]; skipped += d.get("skipped", 0)
        print(f"  {name:18} {d['passed']} passed, {d['failed']} failed, {d.get('skipped', 0)} skipped")
    else:
        print(f"  {name:18} no results (the {name} run did not finish)")
        failed += 1
if failed_steps:
    print("  failed steps: " + ", ".join(failed_steps))
    failed = max(failed, 1)
if passed == 0:
    print("  no test ran")
    failed = max(failed, 1)
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
