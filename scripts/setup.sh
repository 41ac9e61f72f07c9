#!/usr/bin/env bash
# Sets up the Python side on a fresh Debian machine: a virtualenv in .venv with python_backend
# (the `raysleuth` package and CLI, its .pth activation hook) and the test tools.
# Idempotent: a second run with nothing changed takes about a second.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${RAYSLEUTH_PYTHON:-python3}"
say() { echo "[setup] $*" >&2; }

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if ! "$PY" -c "import venv, ensurepip" >/dev/null 2>&1; then
  say "apt-get install python3-venv"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv python3-dev >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $("$PY" --version)"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi

stamp="$VENV/.raysleuth-installed"
want="$(cat "$ROOT/python_backend/pyproject.toml" "$ROOT/python_backend/raysleuth.pth" | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing python_backend (ray, debugpy, aiohttp, test tools) into .venv - first time takes a few minutes"
  "$VENV/bin/python" -m pip install -q -e "$ROOT/python_backend[dev,lsp]"
  echo "$want" >"$stamp"
fi

# The activation hook must sit in site-packages, or RAYSLEUTH=1 does nothing.
"$VENV/bin/python" - <<'PY'
import pathlib, sysconfig, sys
pth = pathlib.Path(sysconfig.get_paths()["purelib"]) / "raysleuth.pth"
if not pth.exists():
    sys.exit(f"setup: {pth} is missing: reinstall with `pip install -e python_backend`")
PY
say "python ready: $("$VENV/bin/python" --version), raysleuth $("$VENV/bin/python" -c 'import raysleuth; print(raysleuth.__version__)')"
