"""``reproduce`` at the edges: one run per folder, kills at any point, corrupted results.

* a lock on OUT for the whole run: a second run (or a ``--fresh``) is refused, naming the first;
* ``--fresh`` checks everything before it deletes anything;
* a result is listed in the manifest before it is written, so no kill leaves one unlisted;
* orphan temporaries of a killed writer are removed on ``--resume``;
* the manifest holds each result's digest (the result itself does not: CSVs stay
  byte-identical), and ``--resume`` recomputes a result whose content no longer matches;
* a used folder is refused before any work; ``--resume`` reuses finished row-only
  experiments (E7's scores, E8, E9) as it reuses finished episodes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

pytest.importorskip("scipy")  # the harness needs the cli extra

from test_reproduce import TINY, _without_timing

import evalstop_experiments.reproduce as reproduce_mod
from evalstop_experiments.experiments import EXPERIMENTS
from evalstop_experiments.plan import Plan, ReproduceOptions
from evalstop_experiments.reproduce import reproduce
from evalstop_experiments.runner import MANIFEST
from evalstop_gym.fileio import FolderInUseError, atomic_write, folder_lock


def _results(out: Path) -> list[Path]:
    return sorted((out / "raw").rglob("seed*.json"))


def test_a_second_run_in_the_same_folder_is_refused_naming_the_first(tmp_path: Path) -> None:
    reproduce(tmp_path, experiments=["E1"], **TINY)
    before = {p: p.read_bytes() for p in _results(tmp_path)}
    with folder_lock(tmp_path, "a test"):  # as another run holding OUT
        for flags in ({"fresh": True}, {"resume": True}, {}):
            with pytest.raises(FolderInUseError) as info:
                reproduce(tmp_path, experiments=["E1"], **TINY, **flags)
            msg = str(info.value)
            assert f"pid {os.getpid()}" in msg and "\n" not in msg
    assert {p: p.read_bytes() for p in _results(tmp_path)} == before  # nothing deleted
    reproduce(tmp_path, experiments=["E1"], resume=True, **TINY)  # the lock went with it


def test_fresh_checks_everything_before_deleting_anything(tmp_path: Path) -> None:
    reproduce(tmp_path, experiments=["E1"], **TINY)
    listed = _results(tmp_path)
    stranger = tmp_path / "raw" / "E1" / "someone-elses-cell" / "seed0.json"
    stranger.parent.mkdir()
    stranger.write_bytes(listed[0].read_bytes())
    with pytest.raises(FileExistsError, match="not in its manifest"):
        reproduce(tmp_path, experiments=["E1"], fresh=True, **TINY)
    assert all(p.exists() for p in listed)  # refused before deleting a single one


def _kill_at_write(monkeypatch: pytest.MonkeyPatch, n: int, after_rename: bool) -> None:
    """Raise KeyboardInterrupt at the ``n``-th rename of a result into place."""
    real = os.replace
    seen = {"n": 0}

    def replace(src, dst, *args, **kwargs):
        if str(dst).endswith(".json") and "seed" in os.path.basename(str(dst)):
            seen["n"] += 1
            if seen["n"] == n:
                if after_rename:
                    real(src, dst, *args, **kwargs)
                raise KeyboardInterrupt
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("after_rename", [False, True])
def test_a_kill_while_storing_a_result_leaves_a_folder_fresh_and_resume_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after_rename: bool
) -> None:
    ref = reproduce(tmp_path / "ref", experiments=["E1"], **TINY)
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _kill_at_write(m, 3, after_rename)
        with pytest.raises(KeyboardInterrupt):
            reproduce(out, experiments=["E1"], **TINY)
    listed = (out / "raw" / MANIFEST).read_text().splitlines()
    assert len(listed) == 3  # the third is listed, written or not
    assert len(_results(out)) == (3 if after_rename else 2)
    res = reproduce(out, experiments=["E1"], resume=True, **TINY)
    assert res.ran == (5 if after_rename else 6)
    for name in ("E1.csv", "E1_summary.csv"):
        assert (out / name).read_bytes() == (ref.out / name).read_bytes()
    res = reproduce(out, experiments=["E1"], fresh=True, **TINY)  # never refuses
    assert res.ran == 8 and res.reused == 0


def test_resume_removes_the_temporaries_a_killed_writer_left(tmp_path: Path) -> None:
    reproduce(tmp_path, experiments=["E1"], **TINY)
    cell = _results(tmp_path)[0].parent
    orphans = [cell / ".seed7.json.k2j4x_9a.tmp", tmp_path / ".REPORT.md.abcdefgh.tmp"]
    mine = [cell / ".notes.tmp", tmp_path / "draft.tmp"]
    for p in orphans + mine:
        p.write_text("x")
    reproduce(tmp_path, experiments=["E1"], resume=True, **TINY)
    assert not any(p.exists() for p in orphans)
    assert all(p.exists() for p in mine)  # not named as the package names its temporaries


@pytest.mark.parametrize("corrupt", ["flip", "zero"])
def test_resume_recomputes_a_result_whose_digest_differs(
    tmp_path: Path, corrupt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = reproduce(tmp_path / "ref", experiments=["E1"], **TINY)
    out = tmp_path / "out"
    reproduce(out, experiments=["E1"], **TINY)
    victim = _results(out)[1]
    row = json.loads(victim.read_text())
    assert "sha256" not in row and "digest" not in row  # the digest lives in the manifest
    if corrupt == "flip":
        row["mean_jct_h"] = row["mean_jct_h"] + 0.1
    else:
        row = {k: (0 if isinstance(v, float) else v) for k, v in row.items()}
    victim.write_text(json.dumps(row, sort_keys=True))  # still a valid result by its keys
    res = reproduce(out, experiments=["E1"], resume=True, **{**TINY, "progress": True})
    assert res.redone == [victim] and res.ran == 1
    err = capsys.readouterr()
    assert "differs from the digest" in err.out + err.err
    for name in ("E1.csv", "E1_summary.csv"):
        assert (out / name).read_bytes() == (ref.out / name).read_bytes()


# A row-only experiment standing in for E8 (which takes a minute): it writes its own file and
# adds a header line, as E7's scores, E8 and E9 do; CALLS counts its builds.
CALLS: list[str] = []


def _fake_build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    CALLS.append(str(out))
    atomic_write(out / "E8.csv", "task,score\nhard-0.12,0.5\n")
    plan.header["E8"] = "the suite's scores: E8.csv"


@pytest.fixture
def fake_e8(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    real = next(e for e in EXPERIMENTS if e.id == "E8")
    fake = dataclasses.replace(real, build=_fake_build, background=False)
    monkeypatch.setattr(
        reproduce_mod, "EXPERIMENTS", tuple(fake if e.id == "E8" else e for e in EXPERIMENTS)
    )
    CALLS.clear()
    return CALLS


def test_a_used_folder_is_refused_before_any_work(tmp_path: Path, fake_e8: list[str]) -> None:
    reproduce(tmp_path, experiments=["E1", "E8"], **TINY)
    assert len(fake_e8) == 1
    t0 = time.process_time()
    with pytest.raises(FileExistsError, match=r"results of E1, E8 .*--resume"):
        reproduce(tmp_path, experiments=["E8", "E1"], **TINY)
    assert len(fake_e8) == 1  # E8 did not run again before the refusal
    assert time.process_time() - t0 < 5
    with pytest.raises(FileExistsError, match="--resume"):
        reproduce(tmp_path, experiments=["E8"], **TINY)  # its record alone marks it used
    assert len(fake_e8) == 1


def test_resume_reuses_a_finished_row_only_experiment(
    tmp_path: Path, fake_e8: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    reproduce(tmp_path, experiments=["E1", "E8"], **TINY)
    report = _without_timing(tmp_path / "REPORT.md")
    res = reproduce(tmp_path, experiments=["E1", "E8"], resume=True, **TINY)
    assert len(fake_e8) == 1 and res.ran == 0
    assert _without_timing(tmp_path / "REPORT.md") == report
    timing = {t.experiment: t for t in res.timings}
    assert timing["E8"].all_reused
    # Other options: run again.
    reproduce(tmp_path, experiments=["E1", "E8"], resume=True, **{**TINY, "n_jobs": 13})
    assert len(fake_e8) == 2
    # Its file changed since it was written: run again, and say why.
    (tmp_path / "E8.csv").write_text("task,score\nhard-0.12,0.9\n")
    opts = {**TINY, "n_jobs": 13, "progress": True}
    capsys.readouterr()
    reproduce(tmp_path, experiments=["E1", "E8"], resume=True, **opts)
    assert len(fake_e8) == 3
    assert "E8.csv changed" in capsys.readouterr().out
    assert (tmp_path / "E8.csv").read_text().endswith("0.5\n")


def test_fresh_deletes_row_only_records_too(tmp_path: Path, fake_e8: list[str]) -> None:
    reproduce(tmp_path, experiments=["E8"], **TINY)
    reproduce(tmp_path, experiments=["E8"], fresh=True, **TINY)
    assert len(fake_e8) == 2


@pytest.mark.slow
def test_resume_reuses_the_real_e8(tmp_path: Path) -> None:
    reproduce(tmp_path, experiments=["E8"], **TINY)
    e8 = (tmp_path / "E8.csv").read_bytes()
    report = _without_timing(tmp_path / "REPORT.md")
    t0 = time.process_time()
    res = reproduce(tmp_path, experiments=["E8"], resume=True, **TINY)
    assert time.process_time() - t0 < 5
    assert {t.experiment: t for t in res.timings}["E8"].all_reused
    assert (tmp_path / "E8.csv").read_bytes() == e8
    assert _without_timing(tmp_path / "REPORT.md") == report


@pytest.mark.parametrize("name", ["REPORT.md", "E1.csv", "E8_stops_hard-0.12.png", "timings.json"])
def test_files_it_would_overwrite_in_a_folder_it_never_used_are_refused(
    tmp_path: Path, name: str
) -> None:
    mine = tmp_path / name
    mine.write_text("mine\n")
    (tmp_path / "notes.txt").write_text("also mine\n")  # a name reproduce never writes
    for flags in ({}, {"resume": True}, {"fresh": True}):
        with pytest.raises(FileExistsError, match=f"{name}.*did not write") as info:
            reproduce(tmp_path, experiments=["E1"], **TINY, **flags)
        assert "\n" not in str(info.value)
    assert mine.read_text() == "mine\n" and not (tmp_path / "raw").exists()
    # once the package has used a folder (its manifest), its own outputs are its to rewrite
    mine.unlink()
    reproduce(tmp_path, experiments=["E1"], **TINY)
    reproduce(tmp_path, experiments=["E1"], resume=True, **TINY)
    assert (tmp_path / "notes.txt").read_text() == "also mine\n"
