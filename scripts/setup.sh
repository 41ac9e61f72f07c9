#!/usr/bin/env bash
# Sets up the Python side on a fresh Debian machine: a virtualenv in .venv with python_backend
# (the `raysleuth` package and CLI, its .pth activation hook) and the test tools.
# Idempotent: a second run with nothing changed takes about a second.
#
# `scripts/setup.sh PART...` sets up what one test step of the version matrix needs instead
# (scripts/test.sh calls each before its step; each is skipped when done already):
#   frameworks  Ray Data/Train/Tune/Serve (`ray[data,train,tune,serve]`), CPU torch 2.13.0 and verl's
#               single controller (verl 0.9.1 without its GPU stack, see VERL below) in .venv
#   py312       .venv312: Python 3.12 (pyenv's 3.12.1, else python3.12), python_backend[dev], ray[data]
#   py313       .cache/venv313: Python 3.13 (pyenv's 3.13.0, else python3.13) with python_backend[dev]
#   ray-min     .cache/venv-raymin: Python 3.11 with python_backend[dev] and the oldest Ray it accepts
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RAYSLEUTH_VENV:-$ROOT/.venv}"  # the test step of the demo makes one of its own
PY="${RAYSLEUTH_PYTHON:-python3}"
say() { echo "[setup] $*" >&2; }

RAY_MIN="2.40.0"  # the oldest Ray python_backend/pyproject.toml accepts (`ray[default]>=2.40`)
TORCH="torch==2.13.0"  # on Python 3.11 pip takes the CPU build this machine ships (about 200 MB)
# verl 0.9.1 as its single controller needs it on CPU: `--no-deps` (its own requirements pull in
# vllm/sglang extras, wandb, datasets, peft ...), then exactly the packages that
# `verl.single_controller.ray` and `verl.protocol` import, directly or through transformers'
# import-time version check (safetensors), each pinned within verl's own bounds.
VERL=(verl==0.9.1 tensordict==0.10.0 pyvers==0.2.3 cloudpickle==3.1.3 omegaconf==2.4.0
  transformers==5.10.4 huggingface_hub==1.33.0 regex==2026.12.2 tqdm==4.70.1 safetensors==0.8.0
  httpx==0.29.0 httpcore==1.0.9)

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

# A Python interpreter of version X.Y: pyenv's newest X.Y.*, else pythonX.Y on PATH.
find_python() {
  local want="$1" root cand
  root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  for cand in $(ls -d "$root"/versions/"$want".*/bin/python3 2>/dev/null | sort -V -r) \
      "$(command -v "python$want" || true)"; do
    if [ -n "$cand" ] && [ -x "$cand" ]; then echo "$cand"; return 0; fi
  done
  return 1
}

# make_venv LABEL DIR PYTHON PIP_ARGS...: a virtualenv at DIR with PIP_ARGS installed (stamped per
# LABEL: a second run with the same arguments and the same pyproject/.pth installs nothing).
make_venv() {
  local label="$1" dir="$2" py="$3"; shift 3
  if [ ! -x "$dir/bin/python" ]; then
    say "creating $dir with $("$py" --version)"
    "$py" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip
  fi
  local stamp="$dir/.raysleuth-installed$label" want
  want="$( (cat "$ROOT/python_backend/pyproject.toml" "$ROOT/python_backend/raysleuth.pth"; echo "$*") \
    | sha256sum | cut -c1-16)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "installing into $(basename "$dir"): $* - first time takes a few minutes"
    "$dir/bin/python" -m pip install -q "$@"
    echo "$want" >"$stamp"
  fi
  # The activation hook must sit in site-packages, or RAYSLEUTH=1 does nothing.
  "$dir/bin/python" - <<'PY'
import pathlib, sysconfig, sys
pth = pathlib.Path(sysconfig.get_paths()["purelib"]) / "raysleuth.pth"
if not pth.exists():
    sys.exit(f"setup: {pth} is missing: reinstall with `pip install -e python_backend`")
PY
  say "$(basename "$dir") ready: $("$dir/bin/python" --version), ray $("$dir/bin/python" -c \
    'from raysleuth.shared.versions import installed_ray_version as v; print(v())')"
}

# no_deps_install LABEL DIR PKG...: PKG... installed with `pip --no-deps` into the virtualenv at DIR,
# stamped like make_venv (a second run with the same list installs nothing).
no_deps_install() {
  local label="$1" dir="$2"; shift 2
  local stamp="$dir/.raysleuth-installed$label" want
  want="$(echo "$*" | sha256sum | cut -c1-16)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "installing into $(basename "$dir") without dependencies: $*"
    "$dir/bin/python" -m pip install -q --no-deps "$@"
    "$dir/bin/python" -c 'import verl.single_controller.ray, verl.protocol' \
      || { say "verl's single controller does not import: a package is missing from VERL"; return 1; }
    echo "$want" >"$stamp"
  fi
}

need_python() {
  local want="$1" py
  if ! py="$(find_python "$want")"; then
    say "no Python $want here: install it (e.g. \`pyenv install $want\`) to run the $want step"
    return 1
  fi
  echo "$py"
}

setup_main() {
  if ! "$PY" -c "import venv, ensurepip" >/dev/null 2>&1; then
    say "apt-get install python3-venv"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv python3-dev >/dev/null
  fi
  make_venv "" "$VENV" "$PY" -e "$ROOT/python_backend[dev,lsp]"
}

for part in "${@:-main}"; do
  case "$part" in
    main) setup_main ;;
    frameworks)
      setup_main
      # torch only here (3.11): on other Pythons pip would fetch the CUDA build, several GB.
      make_venv -frameworks "$VENV" "$PY" -e "$ROOT/python_backend[dev,lsp]" \
        "ray[default,data,train,tune,serve]" "$TORCH"
      no_deps_install -verl "$VENV" "${VERL[@]}"
      ;;
    py312)
      py="$(need_python 3.12)" || exit 1
      make_venv "" "$ROOT/.venv312" "$py" -e "$ROOT/python_backend[dev]" "ray[default,data]"
      ;;
    py313)
      py="$(need_python 3.13)" || exit 1
      make_venv "" "$ROOT/.cache/venv313" "$py" -e "$ROOT/python_backend[dev]"
      ;;
    ray-min) make_venv "" "$ROOT/.cache/venv-raymin" "$PY" -e "$ROOT/python_backend[dev]" "ray[default]==$RAY_MIN" ;;
    *) say "unknown part '$part' (main, frameworks, py312, py313, ray-min)"; exit 2 ;;
  esac
done
