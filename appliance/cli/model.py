"""``appliance model install|list``: the model files the operator brings, and which one runs
(``accept``, the site acceptance run, is ``appliance.cli.acceptance``; ``install`` offers it).

Invariants:
- ``install`` copies, hashes and checks the file with llama.cpp before anything is in place
  (``models.install``); a refused file leaves the installed-models folder as it was and is one
  line, exit 2. Progress goes to stderr, on a terminal only.
- ``list`` reads files' sizes and the registry only: it never hashes (``appliance init`` and
  every model load verify).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from appliance.cli import acceptance, options
from appliance.cli.options import Tree
from appliance.cli.support import ProgressBar, settings_from


def cmd_install(args) -> int:
    from appliance.llm.llama import check_readable
    from common.locations import installed_models_dir
    from common.user_files import regular_file
    from models.install import ModelInstallError, install
    from models.profiles import get_profile

    profile = get_profile(args.profile)
    for given in (args.path, args.mmproj):  # a FIFO or a device is refused before it is opened
        if given and os.path.lexists(given):  # a missing file: install says where it looked
            regular_file(given, ModelInstallError)
    bar = ProgressBar()
    try:
        entry = install(Path(args.path), profile, installed_models_dir(), check=check_readable,
                        mmproj=Path(args.mmproj) if args.mmproj else None,
                        progress=lambda name, done, total: bar.show(f"copying {name}"[:24], done >> 20, total >> 20,
                                                                    "MiB"))
    finally:
        bar.close()
    if args.json:
        print(json.dumps({"profile": entry.profile, "path": str(installed_models_dir() / entry.file),
                          "sha256": entry.sha256, "mmproj": entry.mmproj, "mmproj_sha256": entry.mmproj_sha256}))
    else:
        print(f"installed {entry.file} for profile {entry.profile} in {installed_models_dir()} "
              f"(sha256 {entry.sha256[:16]}..., checked at every start)")
        if profile.name != settings_from(args).model:
            print(f"to use it: APPLIANCE_MODEL={profile.name}")
    acceptance.offer(profile.name, as_json=args.json)
    return 0


def _rows(settings) -> list[dict]:
    """One row per profile; the operator's path and sha256 settings belong to the active one."""
    from appliance.runtime import model_files
    from models.profiles import PROFILES

    active = settings.model
    rows = []
    for name, profile in PROFILES.items():
        own = name == active
        files = model_files(settings.model_copy(update={
            "model": name, "model_path": settings.model_path if own else None,
            "model_sha256": settings.model_sha256 if own else None}))
        present = files.path.is_file()
        mmproj = profile.mmproj_path(files.folder)
        rows.append({"profile": name, "active": name == active, "path": str(files.path), "present": present,
                     "installed": files.installed, "size_bytes": files.path.stat().st_size if present else None,
                     "sha256": files.sha256, "clinical": profile.clinical,
                     "mmproj": str(mmproj) if mmproj else None,
                     "mmproj_present": bool(mmproj and mmproj.is_file()), "description": profile.description})
    return rows


def cmd_list(args) -> int:
    rows = _rows(settings_from(args))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        state = (("installed" if r["installed"] else "present") if r["present"] else "not placed")
        size = f", {r['size_bytes'] / 2**20:.0f} MiB" if r["present"] else ""
        vision = "" if r["mmproj"] is None else (", projector present" if r["mmproj_present"] else ", no projector")
        pin = f", sha256 {r['sha256'][:12]}..." if r["sha256"] else ", sha256 not pinned"
        print(f"{'*' if r['active'] else ' '} {r['profile']}: {state}{size}{vision}{pin}\n    {r['path']}")
    print("* the active profile (APPLIANCE_MODEL or --model)")
    return 0


def register(tree: Tree) -> None:
    """``appliance model install|list|accept``."""
    model = tree.group("model", "install the model files you bring; list what is installed; measure it (accept)")
    ins = model.command("install", "copy, hash and check a GGUF, then record it for a profile", cmd_install)
    ins.add_argument("path", help="the GGUF file, e.g. medgemma-1.5-4b-it-Q4_K_M.gguf")
    ins.add_argument("--mmproj", help="its vision projector GGUF")
    ins.add_argument("--profile", default="medgemma-1.5-4b-it", help="the profile it is for (default medgemma-1.5-4b-it)")
    options.model(ins, help=argparse.SUPPRESS)
    options.json_output(ins)
    ls = model.command("list", "each profile: where its file is, whether it is in place, the active one", cmd_list)
    options.model(ls, help="treat this profile as the active one")
    options.json_output(ls)
    acceptance.register(model)
