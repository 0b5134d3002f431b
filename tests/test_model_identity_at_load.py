"""The runtime loads a model file only when it is its profile's model
(``appliance.runtime.check_model_file``): the 270M demo file under the clinical profile is one
line and exit 2, however it is pointed at, before llama.cpp sees it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from appliance import runtime
from appliance.config import Settings
from common.locations import PROJECT_ROOT, models_dir
from models.assemble import assemble_default_model
from models.gguf_info import ModelIdentityError


@pytest.fixture(scope="module")
def demo_file():
    return assemble_default_model(models_dir())


def test_the_demo_file_under_the_clinical_profile_is_refused_before_llama_cpp(demo_file, appliance_home,
                                                                               monkeypatch):
    import appliance.llm.llama as llama

    monkeypatch.setattr(llama, "LlamaModel", lambda *a, **k: pytest.fail("llama.cpp was handed the file"))
    settings = Settings(model="medgemma-1.5-4b-it", model_path=str(demo_file))
    with pytest.raises(ModelIdentityError, match="not a medgemma-1.5-4b-it model: its own metadata says "
                                                 "'Gemma 3 270m' \\(gemma3, 268M parameters\\)"):
        runtime.load_model(settings)


def test_the_demo_file_under_its_own_profile_passes_the_check(demo_file, appliance_home):
    runtime.check_model_file(runtime.model_files(Settings(model="gemma3-270m", model_path=str(demo_file))))


def test_ask_says_so_in_one_line(demo_file, tmp_path):
    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path), "APPLIANCE_MODEL": "medgemma-1.5-4b-it",
           "APPLIANCE_MODEL_PATH": str(demo_file), "FASTMCP_CHECK_FOR_UPDATES": "off"}
    done = subprocess.run([sys.executable, "-m", "appliance.cli", "ask", "hi"], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "not a medgemma-1.5-4b-it model" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr and not done.stdout
