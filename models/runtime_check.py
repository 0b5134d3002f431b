"""Whether the installed llama.cpp runs on this CPU: ``python -m models.runtime_check`` loads the
embedded default model in a child process and evaluates a few tokens (exit 0), or says why it
cannot (exit 1).

Why: a llama-cpp-python wheel compiled for another CPU (pip's wheel cache keeps one per version,
whatever flags built it) may use instructions this CPU or its hypervisor refuses, and the
process then dies with SIGILL at the first model call, far from the build. ``build.sh`` runs
this check after setup and rebuilds llama-cpp-python when it fails.

Invariant: the check never loads the model in this process, so a crash is reported, not suffered.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from models.profiles import DEFAULT_PROFILE, get_profile

CHILD = """
import sys
from llama_cpp import Llama
model = Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, verbose=False)
model.eval(model.tokenize(b"The patient"))
"""


def check(models_dir: Path) -> str | None:
    """None when llama.cpp loads and runs the default model here, else the reason it does not."""
    path = get_profile(DEFAULT_PROFILE).path(models_dir)
    if not path.is_file():
        return f"the default model is not assembled at {path} (run ./build.sh)"
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return f"llama.cpp died with {name} on this CPU (compiled for instructions it does not run)"
    last = (done.stderr.strip().splitlines() or ["no message"])[-1]
    return f"llama.cpp could not run the default model: {last}"


def main() -> int:
    problem = check(Path(__file__).resolve().parent)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print("llama.cpp runs the default model on this CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
