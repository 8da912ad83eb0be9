"""The corpus readers refuse a FIFO, a device, a folder and an oversized file at once.

These readers (``evalstop_gym.corpus.format`` and ``.loaders``) take
``evalstop_gym.fileio.open_regular`` (each test bounded in time and memory by
``special_files_helper``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from special_files_helper import run_reader, special_files

READERS = {
    "read_traces": "from evalstop_gym.corpus import read_traces; read_traces(path)",
    "load_trl_trainer_state": (
        "from evalstop_gym.corpus.loaders import load_trl_trainer_state; "
        "load_trl_trainer_state(path)"
    ),
    "load_openrlhf_log": (
        "from evalstop_gym.corpus.loaders import load_openrlhf_log; load_openrlhf_log(path)"
    ),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return special_files(tmp_path_factory.mktemp("special"))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "zero", "urandom", "sparse"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_special_file_is_refused_at_once(files, reader: str, kind: str) -> None:
    t0 = time.perf_counter()
    got = run_reader(READERS[reader], files[kind], timeout=20)
    assert got.startswith("CLEAN"), got
    assert time.perf_counter() - t0 < 15


def test_the_corpus_cache_sees_a_same_size_rewrite_with_its_mtime_restored(
    tmp_path: Path,
) -> None:
    import os

    from evalstop_gym.sim.real_curves import load_corpus

    data = Path(__file__).resolve().parents[2] / "evalstop_gym" / "corpus" / "data"
    src = sorted(data.glob("*.jsonl"))[0]
    p = tmp_path / "c.jsonl"
    lines = src.read_text().splitlines(keepends=True)
    p.write_text("".join(lines))
    st = os.stat(p)
    first = load_corpus(str(p))
    p.write_text("".join(lines))  # rewritten in place: same size, then its old mtime
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(p).st_size == st.st_size
    assert load_corpus(str(p)) is not first  # re-read, not served from the cache
