#!/usr/bin/env bash
# The test front door: sets everything up, then runs every test kind one after another
# (lint, Python unit, integration on a real Ray cluster, token-auth cluster, multi-node cluster,
# extension tests inside a real VS Code) and ends with one closing summary line.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/scripts/setup.sh" || exit 1

RESULTS="$(mktemp -d /tmp/rs-results.XXXXXX)"
export RAYSLEUTH_RESULTS_DIR="$RESULTS"
PY="$ROOT/.venv/bin/python"
failed_steps=()
t0=$(date +%s)

step() { echo; echo "=== $1 ($(( $(date +%s) - t0 )) s) ==="; }

step "lint: ruff"
"$ROOT/.venv/bin/ruff" check python_backend tests bench || failed_steps+=(ruff)

# Each suite runs in its own pytest process, one at a time: each owns one Ray cluster.
for suite in unit integration auth multinode; do
  step "python: $suite"
  "$PY" -m pytest -c tests/python/pytest.ini "tests/python/$suite" -q -rs \
      --junitxml="$RESULTS/py-$suite.xml"
  rc=$?
  [ $rc -eq 0 ] || failed_steps+=("python-$suite")
done

# The trigger has a second backend (sys.monitoring) that only Python 3.12+ runs: its unit
# tests run there too, when the machine has a 3.12 (pyenv's or on PATH). They need no Ray.
PY312="$(pyenv root 2>/dev/null)/versions/3.12.1/bin/python3"
[ -x "$PY312" ] || PY312="$(command -v python3.12 || true)"
if [ -n "$PY312" ] && [ -x "$PY312" ]; then
  step "python: unit-py312 (the sys.monitoring trigger)"
  V312="$ROOT/.venv-unit312"
  if [ ! -x "$V312/bin/pytest" ]; then
    "$PY312" -m venv "$V312" && "$V312/bin/pip" install -q pytest pytest-timeout pytest-asyncio \
      || failed_steps+=("python-unit-py312-setup")
  fi
  PYTHONPATH="$ROOT/python_backend" "$V312/bin/python" -m pytest -c tests/python/pytest.ini \
      tests/python/unit/test_trigger.py tests/python/unit/test_scope.py tests/python/unit/test_agent_points.py \
      tests/python/unit/test_agent_debugger.py -q -rs \
      --junitxml="$RESULTS/py-unit-py312.xml" || failed_steps+=("python-unit-py312")
else
  echo "(no Python 3.12 here: the sys.monitoring trigger's unit tests are skipped)"
fi

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
        print(f"  {xml.stem[3:]:12} {t - f - e - sk} passed, {f + e} failed, {sk} skipped")
for name in ("extension-unit", "extension"):
    ext = res / f"{name}.json"
    if ext.exists():
        d = json.loads(ext.read_text())
        passed += d["passed"]; failed += d["failed"]; skipped += d.get("skipped", 0)
        print(f"  {name:12} {d['passed']} passed, {d['failed']} failed, {d.get('skipped', 0)} skipped")
    else:
        print(f"  {name:12} no results (the {name} run did not finish)")
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
