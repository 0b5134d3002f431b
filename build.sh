#!/usr/bin/env bash
# Sets up everything the appliance needs on a fresh machine, then optionally runs it:
#   ./build.sh          set up only
#   ./build.sh run      set up, then start the appliance on the embedded default model
#   ./build.sh test     set up, then run the test suite but its heavy end-to-end tier (pytest -m "not heavy")
#   ./build.sh test-all set up, then run every test, the heavy tier too (what CI runs)
#   ./build.sh host     set up, then build llama.cpp's server for a clinic host (`appliance serve`)
#   ./build.sh bundle [DIR]  set up (with the host's server), then write an offline installation bundle
# Setup: a virtual environment in .venv/, the packages (llama-cpp-python compiled from source;
# pip's wheel cache makes later runs fast), the default model assembled into models/ and
# sha256-checked, and the local databases in the data home ($APPLIANCE_HOME, default
# ~/.local/share/clinical-appliance). llama.cpp's server (.venv/bin/llama-server) is built only
# where a clinic host needs it: `host`, `bundle`, and the test actions (the suite tests the host).
# Only setup uses the network (the package registry).
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '==> %s\n' "$*"; }

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "build.sh: Python 3.11 or newer is required (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi

# A C/C++ toolchain builds llama.cpp (and OpenSSL's headers give its server TLS). Install them
# when missing and we can (Debian, as root).
if ! command -v g++ >/dev/null 2>&1 || ! command -v cmake >/dev/null 2>&1 || [ ! -e /usr/include/openssl/ssl.h ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing the compiler toolchain (g++, cmake, OpenSSL headers)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ cmake libssl-dev >/dev/null
  elif ! command -v g++ >/dev/null 2>&1; then
    echo "build.sh: g++ is needed to build llama.cpp; install your distribution's C++ compiler" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PYTHON" -m venv .venv
fi

say "installing packages (the first build of llama-cpp-python takes several minutes)"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"
# llama.cpp for a CPU family, not for this CPU: GGML_NATIVE would compile in every instruction
# the build machine reports (AMX tiles on recent Xeons), which a VM or another laptop refuses
# with SIGILL. AVX2/FMA/F16C is what the laptops the USB bundle goes to share.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON}"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

# llama.cpp's own server for a clinic host (`appliance serve`), from the same llama.cpp source
# (models/llama_server.py; skipped when the built one matches). A laptop never needs it.
build_host_server() {
  command -v cmake >/dev/null 2>&1 || .venv/bin/python -m pip install --quiet --disable-pip-version-check cmake
  .venv/bin/python -m models.llama_server build
}
case "${1:-}" in
  host|test|test-all|bundle) build_host_server ;;
esac

say "initialising the data home and the default model"
.venv/bin/appliance init

# pip's wheel cache keeps one llama-cpp-python wheel per version, whatever flags built it: one
# compiled elsewhere for other instructions dies at the first model call. Check it runs here.
if ! .venv/bin/python -m models.runtime_check >/dev/null; then
  say "the installed llama.cpp does not run on this CPU: rebuilding llama-cpp-python (several minutes)"
  .venv/bin/python -m pip cache remove llama_cpp_python >/dev/null 2>&1 || true
  version=$(.venv/bin/python -c 'from importlib import metadata; print(metadata.version("llama-cpp-python"))')
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
    "llama-cpp-python==$version"
  .venv/bin/python -m models.runtime_check
fi

case "${1:-}" in
  "") say "ready: run .venv/bin/appliance" ;;
  run) shift; exec .venv/bin/appliance "$@" ;;
  test) shift; exec .venv/bin/python -m pytest -m "not heavy" "$@" ;;
  test-all) shift; exec .venv/bin/python -m pytest "$@" ;;
  host) say "ready: run .venv/bin/appliance serve" ;;
  bundle) shift; exec .venv/bin/python -m appliance.setup.bundle "$@" ;;
  *) echo "build.sh: unknown action '$1' (use: run, test, test-all, host, bundle)" >&2; exit 2 ;;
esac
