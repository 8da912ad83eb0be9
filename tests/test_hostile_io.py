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
