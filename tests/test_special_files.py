"""Every library reader refuses a FIFO, a device, a folder and an oversized file at once.

Each reader runs in a child process bounded in time and memory (``special_files_helper``);
the answer must be the package's own error, within seconds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from special_files_helper import run_reader, special_files

READERS = {
    "read_trace": "from evalstop_gym.sim.traces import read_trace; read_trace(path)",
    "read_regular": "from evalstop_gym.fileio import read_regular; read_regular(path)",
    "read_verified": (
        "from evalstop_gym.fileio import read_verified; read_verified(path, '0' * 64)"
    ),
    "read_meta": "from baselines.learned import read_meta; read_meta(path)",
    "Learned(trust=True)": "from baselines.learned import Learned; Learned(path, trust=True)",
    "Learned(sha256=)": "from baselines.learned import Learned; Learned(path, sha256='0' * 64)",
    # A result file that is a link to the special file; OUT is a fresh folder in OUT_ROOT.
    "load_results": (
        "import pathlib, tempfile\n"
        "from evalstop_experiments.cells import Cell, PolicySpec\n"
        "from evalstop_experiments.runner import load_results, task_path\n"
        "cell = Cell('E1', PolicySpec('NoStop'), {})\n"
        "out = pathlib.Path(tempfile.mkdtemp(dir=OUT_ROOT))\n"
        "p = task_path(out, cell, 0)\n"
        "p.parent.mkdir(parents=True)\n"
        "p.symlink_to(path)\n"
        "load_results(out, [cell], [0])"
    ),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    made = special_files(tmp_path_factory.mktemp("special"))
    return {**made, "outs": tmp_path_factory.mktemp("outs")}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "zero", "urandom", "folder", "sparse"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_special_file_is_refused_at_once(files, reader: str, kind: str) -> None:
    t0 = time.perf_counter()
    code = READERS[reader].replace("OUT_ROOT", repr(str(files["outs"])))
    got = run_reader(code, files[kind])
    assert got.startswith("CLEAN"), got
    assert time.perf_counter() - t0 < 25


def test_open_regular_refuses_before_reading(tmp_path: Path) -> None:
    from evalstop_gym.errors import ConfigError
    from evalstop_gym.fileio import open_regular, read_regular

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="FIFO"):
        open_regular(fifo)  # no writer, yet no hang: O_NONBLOCK
    with pytest.raises(ConfigError, match="character device"):
        read_regular("/dev/zero")
    sparse = tmp_path / "big"
    with open(sparse, "wb") as fh:
        fh.truncate(2 * 2**30)
    t0 = time.process_time()
    with pytest.raises(ConfigError, match="at most"):
        read_regular(sparse)
    assert time.process_time() - t0 < 1
    long_line = tmp_path / "long"
    long_line.write_bytes(b"a\n" + b"x" * 5000 + b"\n")
    with pytest.raises(ConfigError, match="line 2"):
        read_regular(long_line, max_line=4096)
    assert read_regular(long_line, max_line=None).startswith(b"a\n")


def test_a_trace_line_without_end_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    from evalstop_gym.errors import EvalStopError
    from evalstop_gym.sim.traces import MAX_TRACE_LINE, read_trace

    p = tmp_path / "t.csv"
    p.write_text("timestamp,duration,num_gpus,cluster\n" + "1" * (MAX_TRACE_LINE + 10))
    with pytest.raises(EvalStopError, match="line"):
        read_trace(p)


def test_the_trace_cache_sees_a_same_size_rewrite_with_its_mtime_restored(tmp_path: Path) -> None:
    from evalstop_gym.sim.traces import read_trace

    p = tmp_path / "t.csv"
    head = "timestamp,duration,num_gpus,cluster\n"
    p.write_text(head + "2017-10-01 00:00:00,3600,1,a\n2017-10-01 00:00:10,7200,2,a\n")
    st = os.stat(p)
    assert list(read_trace(p).duration_s) == [3600, 7200]
    p.write_text(head + "2017-10-01 00:00:00,3601,1,a\n2017-10-01 00:00:10,7201,2,a\n")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # old mtime restored
    assert os.stat(p).st_size == st.st_size and os.stat(p).st_mtime_ns == st.st_mtime_ns
    assert list(read_trace(p).duration_s) == [3601, 7201]


def test_a_replaced_file_is_a_new_cache_entry(tmp_path: Path) -> None:
    from evalstop_gym.fileio import file_identity

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1")
    b.write_text("2")
    before = file_identity(a)
    os.replace(b, a)
    assert file_identity(a) != before
