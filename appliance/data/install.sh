#!/usr/bin/env bash
# Installs the offline clinical assistant from this bundle, with no network:
#   ./install.sh [PREFIX]     (default: ~/clinical-appliance)
# Checks the bundle's hashes, the Python version and platform the wheels were built for, and the
# free disk space; installs into PREFIX.partial and moves it into place only when everything
# worked (a failed install leaves nothing at PREFIX); installs the bundled model files; runs
# `appliance init` and ends with `appliance smoke`. The data home is $APPLIANCE_HOME (default
# ~/.local/share/clinical-appliance); models go to $APPLIANCE_MODELS (default: models/ in it).
set -euo pipefail
BUNDLE="$(cd "$(dirname "$0")" && pwd)"
PREFIX="${1:-$HOME/clinical-appliance}"
PREFIX="$(mkdir -p "$(dirname "$PREFIX")" && cd "$(dirname "$PREFIX")" && pwd)/$(basename "$PREFIX")"
PARTIAL="$PREFIX.partial"

fail() { echo "install.sh: $*" >&2; exit 1; }
say() { printf '==> %s\n' "$*"; }

[ -e "$PREFIX" ] && fail "$PREFIX exists already: remove it or choose another folder"
PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null 2>&1 || fail "no $PYTHON on this machine (set PYTHON=/path/to/python3)"

want_py=$(sed -n 's/.*"python": "\([0-9.]*\)".*/\1/p' "$BUNDLE/manifest.json")
want_machine=$(sed -n 's/.*"machine": "\([^"]*\)".*/\1/p' "$BUNDLE/manifest.json")
have_py=$("$PYTHON" -c 'import sys; print(f"{sys.version_info.major}.{sys.version_info.minor}")')
have_machine=$("$PYTHON" -c 'import platform; print(platform.machine())')
[ "$have_py" = "$want_py" ] || fail "this bundle's wheels are for Python $want_py; $PYTHON is $have_py"
[ "$have_machine" = "$want_machine" ] || fail "this bundle's wheels are for $want_machine; this machine is $have_machine"

say "checking the bundle's files"
(cd "$BUNDLE" && sha256sum --quiet -c SHA256SUMS) >/dev/null 2>&1 || {
  bad=$(cd "$BUNDLE" && { sha256sum -c SHA256SUMS 2>/dev/null || true; } | grep -v ': OK$' | head -1 || true)
  fail "a bundle file does not match its sha256 (${bad:-unreadable}): copy the bundle again"
}

need_kb=$(( $(du -sk "$BUNDLE" | cut -f1) * 3 ))
free_kb=$(df -Pk "$(dirname "$PREFIX")" | awk 'NR==2 {print $4}')
[ "$free_kb" -ge "$need_kb" ] || fail "not enough disk space in $(dirname "$PREFIX"): need $((need_kb / 1024)) MiB, $((free_kb / 1024)) MiB free"

rm -rf "$PARTIAL"
trap 'rm -rf "$PARTIAL"' EXIT
say "installing into $PREFIX (from the bundle's wheels only)"
"$PYTHON" -m venv "$PARTIAL"
"$PARTIAL/bin/python" -m pip install --quiet --no-index --find-links "$BUNDLE/wheels" --disable-pip-version-check \
  clinical-appliance
# A venv names its own path in its scripts: point them at the final place, then move it there.
grep -rlF "$PARTIAL" "$PARTIAL/bin" | while read -r f; do sed -i "s|$PARTIAL|$PREFIX|g" "$f"; done
sed -i "s|$PARTIAL|$PREFIX|g" "$PARTIAL/pyvenv.cfg"
if [ -d "$BUNDLE/bin" ]; then  # llama.cpp's server, for `appliance serve` on a clinic host
  cp -p "$BUNDLE"/bin/* "$PARTIAL/bin/"
fi
mv "$PARTIAL" "$PREFIX"
trap - EXIT

if [ -d "$BUNDLE/models" ]; then
  for f in "$BUNDLE"/models/*.gguf; do
    profile=$(sed -n "s/.*\"$(basename "$f")\": \"\([^\"]*\)\".*/\1/p" "$BUNDLE/manifest.json")
    [ "$profile" = "mmproj" ] && continue
    mm=()
    for p in "$BUNDLE"/models/*.gguf; do
      [ "$(sed -n "s/.*\"$(basename "$p")\": \"\([^\"]*\)\".*/\1/p" "$BUNDLE/manifest.json")" = "mmproj" ] && mm=(--mmproj "$p")
    done
    say "installing the $profile model"
    "$PREFIX/bin/appliance" model install "$f" --profile "$profile" "${mm[@]}"
  done
fi

say "initialising the data home and the default model"
"$PREFIX/bin/appliance" init
say "smoke test"
"$PREFIX/bin/appliance" smoke
say "installed: run $PREFIX/bin/appliance"
