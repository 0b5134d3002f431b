"""A site's acceptance verdict counts only when this data home signed it
(``appliance.acceptance.store``): a result written by hand, altered, or signed under another key
reads as not accepted, with one line saying so."""

from __future__ import annotations

import json
import stat

from appliance.acceptance import store

SHA = "ab" * 32


def _result(accepted: bool = True) -> dict:
    return {"model_sha256": SHA, "finished": "2026-11-28T03:00:00+00:00", "profile": "medgemma-1.5-4b-it",
            "verdict": {"accepted": accepted, "reasons": [] if accepted else ["intent 0.50 < 0.90"],
                        "checks": [{"short": "intent", "value": 0.93}]}}


def test_a_saved_result_is_signed_and_reads_back_as_its_verdict(appliance_home):
    path = store.save_result(_result())
    assert store.status_for(SHA).accepted and store.status_for(SHA).line.startswith("accepted on 2026-11-28")
    assert stat.S_IMODE(store.key_path().stat().st_mode) == 0o600
    assert len(json.loads(path.read_text())[store.SIGNATURE]) == 64


def test_a_hand_written_verdict_is_not_accepted(appliance_home):
    store.save_result(_result(accepted=False))  # the key exists: a hand-written file still has no signature
    path = store.acceptance_dir() / f"{SHA}.json"
    path.write_text(json.dumps(_result(accepted=True)))
    status = store.status_for(SHA)
    assert status.state == "not accepted" and not status.accepted and status.line == store.NOT_SIGNED
    assert "\n" not in status.line


def test_a_hand_written_verdict_without_any_key_is_not_accepted(appliance_home):
    (appliance_home / "acceptance").mkdir()
    (appliance_home / "acceptance" / f"{SHA}.json").write_text(json.dumps(_result()))
    assert not store.key_path().exists() and store.status_for(SHA).line == store.NOT_SIGNED


def test_an_altered_verdict_or_another_key_is_not_accepted(appliance_home):
    path = store.save_result(_result(accepted=False))
    data = json.loads(path.read_text())
    data["verdict"] = {**data["verdict"], "accepted": True, "reasons": []}  # the signature kept, the verdict flipped
    path.write_text(json.dumps(data))
    assert store.status_for(SHA).line == store.NOT_SIGNED
    store.save_result(_result())
    assert store.status_for(SHA).accepted
    store.key_path().write_bytes(b"k" * store.KEY_BYTES)  # another data home's key, or one made again
    assert store.status_for(SHA).state == "not accepted"
