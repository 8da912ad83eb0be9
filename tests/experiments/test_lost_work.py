"""Work that can be lost: atomic writes and hash records (evalstop_gym.fileio)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalstop_gym.fileio import (
    UntrustedFileError,
    atomic_open,
    atomic_savefig,
    atomic_write,
    read_verified,
    write_hash_record,
)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    p = tmp_path / "REPORT.md"
    atomic_write(p, "old\n")
    with pytest.raises(RuntimeError), atomic_open(p) as fh:
        fh.write("half of the new")
        raise RuntimeError("interrupted")
    assert p.read_text() == "old\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["REPORT.md"]


def test_atomic_write_creates_folders_and_replaces(tmp_path: Path) -> None:
    p = tmp_path / "a" / "b" / "x.json"
    atomic_write(p, b"1")
    atomic_write(p, "2")
    assert p.read_text() == "2"


def test_atomic_savefig_renders_before_replacing(tmp_path: Path) -> None:
    class Broken:
        def savefig(self, fh, format: str) -> None:
            fh.write(b"partial")
            raise ValueError("render failed")

    class Fine:
        def savefig(self, fh, format: str) -> None:
            fh.write(format.encode())

    p = tmp_path / "plot.png"
    atomic_savefig(Fine(), p)
    with pytest.raises(ValueError):
        atomic_savefig(Broken(), p)
    assert p.read_bytes() == b"png"


def test_hash_record_round_trip_and_tamper(tmp_path: Path) -> None:
    p = tmp_path / "m.zip"
    p.write_bytes(b"model")
    digest = write_hash_record(p)
    assert (tmp_path / "m.zip.sha256").read_text().startswith(digest)
    assert read_verified(p) == b"model"
    p.write_bytes(b"other")
    with pytest.raises(UntrustedFileError, match="differs"):
        read_verified(p)


def test_resume_recomputes_invalid_results_and_names_them(tmp_path: Path) -> None:
    pytest.importorskip("scipy")  # the harness needs the cli extra
    from test_reproduce import TINY  # the smallest reproduce run, shared with its own tests

    from evalstop_experiments.reproduce import reproduce

    ref = reproduce(tmp_path / "ref", experiments=["E1"], **TINY)
    reproduce(tmp_path, experiments=["E1"], **TINY)
    files = sorted((tmp_path / "raw").rglob("seed*.json"))
    empty, bogus, other, truncated = files[:4]
    empty.write_text("")
    bogus.write_text('{"bogus": 1}')
    other.write_text(files[5].read_text())  # another (cell, seed)'s valid result
    truncated.write_text(truncated.read_text()[:40])
    res = reproduce(tmp_path, experiments=["E1"], resume=True, **TINY)
    assert sorted(res.redone) == [empty, bogus, other, truncated]
    assert res.ran == 4 and res.reused == len(files) - 4
    for name in ("E1.csv", "E1_summary.csv"):
        assert (tmp_path / name).read_bytes() == (ref.out / name).read_bytes(), name
    from test_reproduce import _without_timing  # the timing table says what was reused

    assert _without_timing(tmp_path / "REPORT.md") == _without_timing(ref.out / "REPORT.md")


def test_fresh_deletes_only_what_the_package_wrote(tmp_path: Path) -> None:
    pytest.importorskip("scipy")  # the harness needs the cli extra
    from test_reproduce import TINY  # the smallest reproduce run, shared with its own tests

    from evalstop_experiments.reproduce import reproduce

    reproduce(tmp_path, experiments=["E1"], **TINY)
    mine = tmp_path / "raw" / "notes.txt"
    mine.write_text("my notes")
    nested = next((tmp_path / "raw").rglob("seed0.json")).parent / "keep.json"
    nested.write_text("{}")
    res = reproduce(tmp_path, experiments=["E1"], fresh=True, **TINY)
    assert res.ran == 8 and res.reused == 0
    assert mine.read_text() == "my notes" and nested.read_text() == "{}"


def test_fresh_refuses_results_it_did_not_write(tmp_path: Path) -> None:
    pytest.importorskip("scipy")  # the harness needs the cli extra
    from test_reproduce import TINY  # the smallest reproduce run, shared with its own tests

    from evalstop_experiments.reproduce import reproduce

    reproduce(tmp_path, experiments=["E1"], **TINY)
    (tmp_path / "raw" / "MANIFEST.txt").unlink()  # as if written by someone else
    # first its report and tables at the top of the folder, now someone else's, are refused
    with pytest.raises(FileExistsError, match=r"REPORT\.md.*did not write"):
        reproduce(tmp_path, experiments=["E1"], fresh=True, **TINY)
    for p in tmp_path.iterdir():
        if p.is_file():
            p.unlink()
    with pytest.raises(FileExistsError, match="not in its manifest"):
        reproduce(tmp_path, experiments=["E1"], fresh=True, **TINY)
    assert len(list((tmp_path / "raw").rglob("seed*.json"))) == 8
