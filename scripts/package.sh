#!/usr/bin/env bash
# Builds what a user installs: the extension as raysleuth-<version>.vsix (vsce; esbuild
# has bundled every npm dependency into dist/extension.js, and uPlot with the chart webviews'
# code into dist/webview/charts.js and .css, so the .vsix needs no other extension, no
# node_modules and no network) and the Python side as a wheel in dist/. Both land in
# dist/ (ignored). Skipped when the inputs have not changed since the last run.
# Needs the npm packages (scripts/setup_node.sh --build-only) and .venv (scripts/setup.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { echo "[package] $*"; }

VERSION="$(node -p 'require("./package.json").version')"
PY_VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' python_backend/pyproject.toml | head -1)"
VSIX="dist/raysleuth-$VERSION.vsix"
WHEEL="dist/raysleuth-$PY_VERSION-py3-none-any.whl"
PY="${RAYSLEUTH_PACKAGE_PYTHON:-$ROOT/.venv/bin/python}"

# Everything that ends up in either artifact: a change to any of them packages again.
inputs_hash() {
  {
    cat package.json .vscodeignore README.md dist/extension.js dist/webview/charts.js dist/webview/charts.css
    find extension/media docs python_backend -type f \( -name '*.py' -o -name '*.pth' -o -name '*.toml' \
      -o -name '*.md' -o -name '*.svg' -o -name '*.png' \) -not -path '*/__pycache__/*' 2>/dev/null | sort | xargs cat || true
  } | sha256sum | cut -c1-16
}

[ -f dist/extension.js ] && [ -f dist/webview/charts.js ] || npm run --silent compile
stamp="dist/.package-stamp"
want="$(inputs_hash)"
if [ -f "$VSIX" ] && [ -f "$WHEEL" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  say "up to date: $VSIX, $WHEEL"
  exit 0
fi

say "vsce package -> $VSIX"
# --no-dependencies: dist/extension.js is a bundle (package.json's "compile"); node_modules stays out.
# --no-rewrite-relative-links: the README's screenshots (docs/*.png) ship inside the .vsix.
npx --no-install vsce package --no-dependencies --skip-license --allow-missing-repository \
  --no-rewrite-relative-links -o "$VSIX" >dist/vsce.log 2>&1 \
  || { cat dist/vsce.log >&2; exit 1; }
# The .vsix must hold what the extension loads at run time, and no node_modules.
listing="$(unzip -l "$VSIX")"
for need in extension/package.json extension/dist/extension.js extension/extension/media/raysleuth.svg \
    extension/dist/webview/charts.js extension/dist/webview/charts.css; do
  grep -q " $need\$" <<<"$listing" || { echo "[package] $VSIX lacks $need" >&2; exit 1; }
done
# The language client (vscode-languageclient) runs from inside the bundle: nothing may require it
# from node_modules, which the .vsix leaves out (so it works without any other extension).
# (Read from a file, not a pipe: `unzip | grep -q` fails under pipefail when grep stops early.)
bundle="$(mktemp)"
unzip -p "$VSIX" extension/dist/extension.js >"$bundle"
if grep -qE 'require\("(vscode-languageclient|vscode-languageserver-protocol|vscode-jsonrpc)' "$bundle"; then
  echo "[package] $VSIX: dist/extension.js requires the language client instead of bundling it" >&2
  rm -f "$bundle"
  exit 1
fi
grep -q 'raySleuth/editorBreakpoints' "$bundle" \
  || { echo "[package] $VSIX: dist/extension.js has no language client (extension/lsp)" >&2; rm -f "$bundle"; exit 1; }
rm -f "$bundle"
if grep -q "node_modules/" <<<"$listing"; then
  echo "[package] $VSIX holds node_modules: check .vscodeignore" >&2
  exit 1
fi

say "pip wheel python_backend -> $WHEEL"
rm -f dist/raysleuth-*.whl
"$PY" -m pip wheel -q --no-deps -w dist ./python_backend >dist/wheel.log 2>&1 \
  || { cat dist/wheel.log >&2; exit 1; }
[ -f "$WHEEL" ] || { echo "[package] no $WHEEL after pip wheel (see dist/wheel.log)" >&2; exit 1; }
# The activation hook (RAYSLEUTH=1) must sit at the top of the wheel, next to the package.
"$PY" - "$WHEEL" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
missing = [n for n in ("raysleuth.pth", "raysleuth/__init__.py", "raysleuth/cli/__init__.py", "raysleuth/shared/versions.py", "raysleuth/probes/gpu.py") if n not in names]
if missing:
    sys.exit(f"[package] {sys.argv[1]} lacks {missing}")
PY
# It installs: pip puts the package and the hook in place, and the CLI imports from there.
target="$(mktemp -d /tmp/raysleuth-wheel.XXXXXX)"
trap 'rm -rf "$target"' EXIT
"$PY" -m pip install -q --no-deps --no-index --target "$target" "$WHEEL" >dist/wheel-install.log 2>&1 \
  || { cat dist/wheel-install.log >&2; exit 1; }
[ -f "$target/raysleuth.pth" ] || { echo "[package] installing $WHEEL put no raysleuth.pth in place" >&2; exit 1; }
PYTHONPATH="$target" "$PY" -c 'import sys, raysleuth, raysleuth.cli; assert raysleuth.__file__.startswith(sys.argv[1]), raysleuth.__file__' "$target" \
  || { echo "[package] $WHEEL does not import from where it installed" >&2; exit 1; }
echo "$want" >"$stamp"
say "ok: $VSIX ($(du -k "$VSIX" | cut -f1) KB), $WHEEL ($(du -k "$WHEEL" | cut -f1) KB)"
