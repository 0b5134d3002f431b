"""Missing, corrupt and mismatched model files give clear errors naming the path."""

from __future__ import annotations

import pytest

from appliance.errors import ModelFileError
from appliance.llm.llama import LlamaModel
from models.profiles import get_profile
from models.verify import sha256_of, verify_model_file


def test_missing_file_names_the_expected_path(tmp_path):
    path = tmp_path / "absent.gguf"
    with pytest.raises(ModelFileError, match=str(path)):
        verify_model_file(path, None, hint="Run ./build.sh")


def test_not_a_gguf(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"<html>proxy error</html>")
    with pytest.raises(ModelFileError, match="not a GGUF"):
        verify_model_file(path, None)


def test_checksum_mismatch_and_cache(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 100)
    good = sha256_of(path)
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        verify_model_file(path, "0" * 64)
    assert verify_model_file(path, good) == path
    path.write_bytes(b"GGUF" + b"\1" * 100)  # changed after a good check: must be re-hashed
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        verify_model_file(path, good)


def test_production_profile_without_the_operator_file_says_where_to_put_it(tmp_path):
    profile = get_profile("medgemma-1.5-4b-it")
    with pytest.raises(ModelFileError, match="APPLIANCE_MODEL_PATH"):
        LlamaModel(profile, tmp_path / profile.file_name)


def test_truncated_gguf_is_refused_before_llama_cpp_sees_it(tmp_path):
    profile = get_profile("gemma3-270m")
    path = tmp_path / profile.file_name
    path.write_bytes(b"GGUF" + b"\0" * 64)  # right magic, wrong content: the sha256 catches it
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        LlamaModel(profile, path)
