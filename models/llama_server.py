"""llama.cpp's own HTTP server (``llama-server``): built at setup from the llama.cpp that the
installed llama-cpp-python vendors, and started on the clinic host by ``appliance serve``.

Invariants:
- Built only at setup (``build.sh``, ``python -m models.llama_server build``): the source is
  llama-cpp-python's sdist of the installed version (``pip download``, served from pip's cache
  after the first time), configured so that the build downloads nothing (no curl, no prebuilt
  web UI), with TLS when OpenSSL's headers are present. A stamp beside the binary (version, TLS)
  makes a later setup skip the build.
- ggml (the tensor library, the largest part of llama.cpp to compile) is not compiled again:
  the build links the ``libggml*.so`` that llama-cpp-python installed (its CMake package in
  ``site-packages/lib/cmake/ggml``), found at run time through a RUNPATH relative to the
  binary (``$ORIGIN/../lib/pythonX.Y/site-packages/lib``), so the copy a bundle installs into
  its own venv finds its own. Without that package, everything is compiled as before.
- ``locate`` finds the binary: ``$APPLIANCE_LLAMA_SERVER``, else ``llama-server`` beside the
  running Python (the venv's ``bin``); ``None`` when there is none.
- ``command`` is the one place that turns a model file and the host's settings into
  llama-server's command line: bound to the address given (never all interfaces by default;
  a path ending in ``.sock`` is a Unix socket, how ``appliance serve`` runs it behind its
  key-checking front, ``appliance.host.model_gate``), the profile's name as the model alias
  (terminals read it to know which profile answers), a key file when one is given (tests), no
  web UI, no prompt text in its log. A key made for one run goes in ``API_KEY_ENV`` instead,
  never on the command line (which every local user can read).
- Threads: ``--threads`` (one-token steps) and ``--threads-batch`` (prefill, and the steps that
  decode several slots at once) are fixed for the server's life; ``appliance serve`` chooses
  them for the host (``appliance.llm.threads.host_threads``: one core left to the host's own
  servers on 4 cores or more; ``APPLIANCE_N_THREADS`` overrides). Slots add no threads: the
  running slots' tokens go into one batch each step, on the same threads, so ``--parallel``
  above the core count costs no oversubscription.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from common import environment

BINARY = "llama-server"
STAMP_SUFFIX = ".stamp.json"
API_KEY_ENV = "LLAMA_API_KEY"  # llama-server reads its key from here too (comma-separated keys)


def locate() -> Path | None:
    """The llama-server binary this appliance uses, or None when none is built."""
    env = environment.read(environment.LLAMA_SERVER)
    path = Path(env).expanduser() if env else Path(sys.executable).parent / BINARY
    return path if path.is_file() and os.access(path, os.X_OK) else None


def has_tls(binary: Path) -> bool:
    """Whether ``binary`` was built with OpenSSL (its stamp says so)."""
    try:
        return bool(json.loads(binary.with_name(binary.name + STAMP_SUFFIX).read_text())["tls"])
    except (OSError, ValueError, KeyError):
        return False


@dataclass(frozen=True)
class ServerSettings:
    model: Path
    alias: str  # the profile name
    host: str  # an address, or a Unix socket path ending in ".sock"
    port: int  # unused with a socket
    n_ctx: int  # per slot (the profile's context); the KV cache holds n_ctx x slots tokens
    slots: int = 4  # requests decoded side by side
    threads: int | None = None  # one-token steps; None: every core
    threads_batch: int | None = None  # prefill and multi-slot steps; None: as ``threads``
    key_file: Path | None = None  # one API key per line; None: no key asked (loopback only)
    tls: tuple[Path, Path] | None = None  # (certificate, key)
    mmproj: Path | None = None  # the profile's vision projector, checked (models.projector); None: no images
    nice: int | None = None  # run at this niceness (``nice -n``); None: the caller's


def command(binary: Path, s: ServerSettings) -> list[str]:
    """llama-server's argv for ``s``."""
    argv = [str(binary), "--model", str(s.model), "--alias", s.alias, "--host", s.host, "--port", str(s.port),
            "--ctx-size", str(s.n_ctx * s.slots), "--parallel", str(s.slots),
            "--threads", str(s.threads or max(1, os.cpu_count() or 1)),
            "--threads-batch", str(s.threads_batch or s.threads or max(1, os.cpu_count() or 1)), "--n-gpu-layers", "0",
            "--no-webui", "--log-verbosity", "1", "--no-slots",
            # the full-size sliding-window cache, as llama.cpp's library default gives the in-process
            # model: a terminal's next request reuses every token the slot holds (the host's
            # constrained calls are several requests over one growing prompt, appliance.llm.server_decoding)
            "--swa-full"]
    if s.key_file is not None:
        argv += ["--api-key-file", str(s.key_file)]
    if s.tls is not None:
        argv += ["--ssl-cert-file", str(s.tls[0]), "--ssl-key-file", str(s.tls[1])]
    if s.mmproj is not None:
        argv += ["--mmproj", str(s.mmproj)]
    if s.nice is not None:
        argv = ["nice", "-n", str(s.nice), *argv]  # every thread llama-server starts inherits it
    return argv


# -- the build (setup time only) ----------------------------------------------------------
# For a CPU family, not the build machine's CPU (as build.sh builds llama-cpp-python): a native
# build compiles in AMX and other instructions that a VM or another host refuses with SIGILL.
PORTABLE_CPU = ("-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
                "-DGGML_BMI2=ON")


def installed_ggml() -> Path | None:
    """llama-cpp-python's ggml CMake package (``.../site-packages/lib/cmake/ggml``), when its
    libraries are installed beside it; None otherwise."""
    for root in map(Path, sys.path):
        config = root / "lib" / "cmake" / "ggml" / "ggml-config.cmake"
        if config.is_file() and any((root / "lib").glob("libggml-base.so*")):
            return config.parent
    return None


def _stamp() -> dict:
    return {"llama_cpp_python": metadata.version("llama-cpp-python"), "tls": Path("/usr/include/openssl/ssl.h").exists(),
            "cpu": list(PORTABLE_CPU), "ggml": "llama-cpp-python's" if installed_ggml() else "compiled"}


def _ggml_options(dest: Path) -> list[str]:
    """CMake options that link llama-cpp-python's ggml instead of compiling it (none when absent)."""
    package = installed_ggml()
    if package is None:
        return []
    libs = package.parent.parent  # .../site-packages/lib
    return ["-DLLAMA_USE_SYSTEM_GGML=ON", f"-Dggml_DIR={package}",
            f"-DCMAKE_BUILD_RPATH=$ORIGIN/{os.path.relpath(libs, dest.resolve())}"]


def build(dest: Path, *, progress=print) -> Path:
    """Build llama-server into ``dest`` (a folder) unless its stamp already matches."""
    binary = dest / BINARY
    stamp_file = binary.with_name(BINARY + STAMP_SUFFIX)
    want = _stamp()
    try:
        if binary.is_file() and json.loads(stamp_file.read_text()) == want:
            progress(f"llama-server {want['llama_cpp_python']} is built")
            return binary
    except (OSError, ValueError):
        pass
    cmake = shutil.which("cmake") or shutil.which("cmake", path=str(Path(sys.executable).parent))
    if cmake is None:
        raise SystemExit("llama-server needs cmake: install it (build.sh does on Debian as root)")
    with tempfile.TemporaryDirectory(prefix="llama-server-") as tmp:
        work = Path(tmp)
        progress(f"fetching the llama.cpp source of llama-cpp-python {want['llama_cpp_python']} (pip's cache)")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"llama-cpp-python=={want['llama_cpp_python']}", "-d", str(work)], check=True)
        sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
        shutil.unpack_archive(sdist, work)
        source = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"))
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        options = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", *PORTABLE_CPU,
                   f"-DLLAMA_OPENSSL={'ON' if want['tls'] else 'OFF'}", "-DLLAMA_BUILD_TESTS=OFF",
                   "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
                   "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", *_ggml_options(dest)]
        progress("building llama-server (several minutes the first time"
                 + (", ggml from llama-cpp-python)" if want["ggml"] != "compiled" else ")"))
        subprocess.run([cmake, "-S", str(source), "-B", str(work / "build"), *generator, *options],
                       check=True, stdout=subprocess.DEVNULL)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
        subprocess.run([cmake, "--build", str(work / "build"), "--target", BINARY, "-j", jobs],
                       check=True, stdout=subprocess.DEVNULL)
        built = next((work / "build").rglob(BINARY))
        dest.mkdir(parents=True, exist_ok=True)
        partial = binary.with_name(BINARY + ".partial")
        shutil.copy2(built, partial)
        os.replace(partial, binary)
    stamp_file.write_text(json.dumps(want))
    progress(f"llama-server built: {binary}")
    return binary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.llama_server",
                                     description="build llama.cpp's server for the clinic host (setup time)")
    parser.add_argument("action", choices=["build", "where"])
    parser.add_argument("--dest", type=Path, default=Path(sys.executable).parent,
                        help="folder for the binary (default: beside this Python)")
    args = parser.parse_args(argv)
    if args.action == "where":
        found = locate()
        print(found if found else "no llama-server is built (./build.sh builds it)")
        return 0 if found else 1
    build(args.dest, progress=lambda m: print(f"==> {m}", flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
