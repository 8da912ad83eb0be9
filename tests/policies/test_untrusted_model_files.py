"""A crafted model zip must not run code: only files matching their hash record are loaded.

SB3 zips hold cloudpickle data, so loading one runs whatever it holds.  The crafted zip
below has an ``evalstop_gym.json`` entry (so it looks like a model) and a ``data`` entry whose
pickled payload creates a marker file.  ``trust=True`` proves the payload is real; without it
the file is refused and the marker never appears.
"""

from __future__ import annotations

import base64
import json
import pickle
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

from baselines.learned import META_NAME, Learned
from evalstop_gym.fileio import (
    UntrustedFileError,
    sha256_bytes,
    verify_hash_record,
    write_hash_record,
)


class _Payload:
    """Unpickling this touches ``marker``: a stand-in for arbitrary code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


def _crafted_zip(path: Path, marker: Path) -> Path:
    blob = base64.b64encode(pickle.dumps(_Payload(marker))).decode()
    data = {"policy_class": {":type:": "<class 'type'>", ":serialized:": blob}}
    meta = {"algo": "dqn", "obs_fields": ["evals"], "flatten": False, "observation_space": {}}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("data", json.dumps(data))
        zf.writestr(META_NAME, json.dumps(meta))
    return path


def test_the_payload_is_real_when_trusted(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    model = _crafted_zip(tmp_path / "evil.zip", marker)
    # Not a working model: it fails after the payload ran.
    with pytest.raises(Exception):
        Learned(model, trust=True)
    assert marker.exists()


def test_a_crafted_zip_without_record_does_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    model = _crafted_zip(tmp_path / "evil.zip", marker)
    with pytest.raises(UntrustedFileError, match="no hash record"):
        Learned(model)
    assert not marker.exists()
    assert not verify_hash_record(model)  # E6 retrains over it instead of reusing it


def test_a_zip_swapped_after_its_record_does_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    model = tmp_path / "model.zip"
    model.write_bytes(b"the file train wrote")
    write_hash_record(model)
    _crafted_zip(model, marker)
    with pytest.raises(UntrustedFileError, match="differs from the recorded"):
        Learned(model)
    with pytest.raises(UntrustedFileError, match="differs"):
        Learned(model, sha256=sha256_bytes(b"something else"))
    assert not marker.exists()
    assert not verify_hash_record(model)
