#!/usr/bin/env bash
# Runs a benchmark on Python 3.11 (.venv) and, when pyenv has it, on 3.12 (.venv312).
# Usage: bench/run.sh NAME     one benchmark (bench/NAME.py)
#        bench/run.sh all      every benchmark, then bench/RESULTS.md from their JSON lines
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="${1:-agent_overhead}"
"$ROOT/scripts/setup.sh"
pythons=("$ROOT/.venv/bin/python")
py312="$(pyenv root 2>/dev/null)/versions/3.12.1/bin/python3"
if [ -x "$py312" ] || command -v python3.12 >/dev/null 2>&1; then
  [ -x "$py312" ] || py312="$(command -v python3.12)"
  if [ ! -x "$ROOT/.venv312/bin/python" ]; then
    "$py312" -m venv "$ROOT/.venv312"
    "$ROOT/.venv312/bin/python" -m pip install -q --upgrade pip
  fi
  "$ROOT/.venv312/bin/python" -c "import raysleuth" 2>/dev/null \
    || "$ROOT/.venv312/bin/python" -m pip install -q -e "$ROOT/python_backend"
  pythons+=("$ROOT/.venv312/bin/python")
fi
if [ "$name" = all ]; then
  mkdir -p "$ROOT/bench/results"
  started=$(date +%s)
  out="$ROOT/bench/results/all-$(date +%Y%m%d-%H%M%S).jsonl"
  for script in "$ROOT"/bench/*.py; do
    b="$(basename "$script" .py)"
    case "$b" in _*|results) continue ;; esac
    for py in "${pythons[@]}"; do
      echo "=== $b on $py" >&2
      # One benchmark failing (or needing what this Python lacks) must not stop the others.
      rc=0
      "$py" "$script" | tee -a "$out" || rc=$?
      if [ "$rc" -ne 0 ]; then
        v="$("$py" -c 'import platform; print(platform.python_version())')"
        echo "{\"bench\": \"$b\", \"python\": \"$v\", \"error\": \"exit $rc\", \"ok\": false}" >> "$out"
      fi
    done
  done
  "${pythons[0]}" "$ROOT/bench/results.py" "$out" "$ROOT/bench/RESULTS.md" "$(($(date +%s) - started))"
  exit 0
fi
for py in "${pythons[@]}"; do
  "$py" "$ROOT/bench/$name.py"
done
