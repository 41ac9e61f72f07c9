#!/usr/bin/env bash
# The demo front door: sets everything up, then runs `raysleuth demo` (an embedded local Ray
# cluster with the agent on, 4 ranked trainers, the broker) and prints the live worker table.
# Extra arguments go to `raysleuth demo` (e.g. --forever, --steps 100, --state-dir DIR).
# RAYSLEUTH_VENV=DIR: set up and run in that virtualenv instead of .venv (scripts/test.sh does).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
if [ "${RAYSLEUTH_SKIP_EXTENSION_BUILD:-0}" != 1 ]; then
  "$ROOT/scripts/setup_node.sh" --build-only >&2
fi
exec "${RAYSLEUTH_VENV:-$ROOT/.venv}/bin/raysleuth" demo "$@"
