"""Model files are checked before they are parsed, and parsed within bounds.

The bytes are verified first (pinned hash or ``.sha256`` record); the zip's metadata is then
read from those very bytes with a cap on the member count and on every member's size, and
checked field by field.  Every failure is :class:`evalstop_gym.errors.EvalStopError` with a
one-line message: no raw ``TypeError``, no hang, no ``MemoryError``.
"""

from __future__ import annotations

import json
import resource
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

import baselines.learned as learned_mod
from baselines.learned import META_NAME, Learned, ModelFileError, read_meta
from evalstop_gym.errors import EvalStopError
from evalstop_gym.fileio import UntrustedFileError, sha256_bytes, write_hash_record

GOOD_META = {
    "algo": "ppo",
    "obs_fields": ["evals"],
    "flatten": False,
    "observation_space": {"evals": {"low": [0.0], "high": [1.0]}},
}


def _zip(path: Path, meta: bytes | str, members: int = 0) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(members):
            zf.writestr(f"m{i}", b"")
        zf.writestr(META_NAME, meta)
    return path


def _one_line(e: BaseException) -> str:
    msg = str(e)
    assert "\n" not in msg and len(msg) < 1000, msg
    return msg


def test_unrecorded_bytes_are_refused_before_their_metadata_is_parsed(tmp_path: Path) -> None:
    model = _zip(tmp_path / "m.zip", "[not, json")  # broken metadata, no record
    with pytest.raises(UntrustedFileError, match="no hash record"):
        Learned(model)


@pytest.mark.parametrize(
    "meta",
    [
        "[]",
        "null",
        '{"algo": "ppo"}',
        json.dumps({**GOOD_META, "algo": ["ppo"]}),
        json.dumps({**GOOD_META, "obs_fields": 3}),
        json.dumps({**GOOD_META, "observation_space": {"evals": {"low": "x", "high": [1]}}}),
        json.dumps({**GOOD_META, "observation_space": {"evals": {"low": [0], "high": [1, 2]}}}),
        json.dumps({**GOOD_META, "observation_space": []}),
        "[" * 100_000,
        b"\xff\xfe not utf-8",
    ],
)
def test_recorded_files_with_crafted_metadata_give_the_packages_error(
    tmp_path: Path, meta: str | bytes
) -> None:
    model = _zip(tmp_path / "m.zip", meta)
    write_hash_record(model)
    with pytest.raises(EvalStopError) as info:
        Learned(model)
    _one_line(info.value)
    with pytest.raises(EvalStopError):
        read_meta(model)


def test_a_metadata_member_that_inflates_is_refused_within_a_few_mib(tmp_path: Path) -> None:
    # 64 MiB of JSON whitespace deflates to ~64 kB: before, read_meta inflated all of it.
    meta = "{" + " " * (64 * 2**20) + json.dumps(GOOD_META)[1:]
    model = _zip(tmp_path / "bomb.zip", meta)
    del meta
    assert model.stat().st_size < 2**20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ModelFileError, match="at most"):
        read_meta(model)
    write_hash_record(model)
    with pytest.raises(ModelFileError, match="at most"):
        Learned(model)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 32 * 1024


def test_too_many_members_are_refused(tmp_path: Path) -> None:
    model = _zip(tmp_path / "many.zip", json.dumps(GOOD_META), members=500)
    with pytest.raises(ModelFileError, match="members"):
        read_meta(model)


@pytest.mark.parametrize("data", [b"", b"PK\x03\x04 truncated", b"not a zip at all" * 100])
def test_not_a_zip_is_the_packages_error(tmp_path: Path, data: bytes) -> None:
    model = tmp_path / "m.zip"
    model.write_bytes(data)
    with pytest.raises(ModelFileError):
        read_meta(model)
    write_hash_record(model)
    with pytest.raises(ModelFileError):
        Learned(model)


def test_a_missing_model_is_the_packages_error(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="no such model"):
        read_meta(tmp_path / "nope.zip")
    with pytest.raises(ModelFileError, match="no such model"):
        Learned(tmp_path / "nope.zip")


def test_the_pinned_pretrained_path_is_bounded_too(tmp_path: Path, monkeypatch) -> None:
    meta = "{" + " " * (32 * 2**20) + json.dumps(GOOD_META)[1:]
    bomb = _zip(tmp_path / "hard.zip", meta)
    monkeypatch.setattr(learned_mod, "PRETRAINED_DIR", tmp_path)
    monkeypatch.setitem(learned_mod.PRETRAINED, "hard", sha256_bytes(bomb.read_bytes()))
    with pytest.raises(ModelFileError, match="at most"):
        Learned.pretrained("hard")


def test_the_pretrained_mismatch_names_the_task_it_was_trained_on() -> None:
    from evalstop_gym.envs import EvalStopEnv

    model = Learned.pretrained("hard")
    with pytest.raises(EvalStopError) as info:
        model.check_observation_space(EvalStopEnv(n_jobs=10).observation_space)
    msg = _one_line(info.value)
    assert "hard-0.05" in msg and "eval_window=20" not in msg
    # The advice works: the task's env is accepted.
    from evalstop_gym import suite_task

    model.check_observation_space(EvalStopEnv(**suite_task("hard-0.05")).observation_space)


def test_the_benchmark_mismatch_advice_is_one_that_is_accepted(capsys) -> None:
    from evalstop_cli.main import main

    argv = ["benchmark", "--seeds", "2", "--workers", "1", "--n-jobs", "10"]
    assert main([*argv, "--policy", "pretrained:hard"]) == 2
    err = capsys.readouterr().err
    assert "hard-0.05" in err and "eval_window=20" not in err
    assert "--calibration hard --eval-noise 0.05" in err
