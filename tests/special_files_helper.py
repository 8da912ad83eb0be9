"""Run one reader on one special file in a child process with a time and memory limit.

Before the readers refused special files, a FIFO with no writer hung them and ``/dev/zero``
grew their memory until ``MemoryError``: a child process bounds both, so a regression fails
its test instead of taking the test run down.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))
path = sys.argv[1]
from evalstop_gym.errors import EvalStopError
try:
    exec(sys.argv[2])
except EvalStopError as e:
    print("CLEAN", type(e).__name__, str(e).replace("\\n", " "))
except BaseException as e:
    print("RAW", type(e).__name__, str(e)[:200].replace("\\n", " "))
else:
    print("READ")
"""


def run_reader(code: str, path: str | os.PathLike[str], timeout: float = 30.0) -> str:
    """``CLEAN <error> <message>``, ``RAW <type> ...``, ``READ`` or ``HANG`` for ``code``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        res = subprocess.run(
            [sys.executable, "-c", CHILD, os.fspath(path), code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return "HANG"
    return (res.stdout.strip().splitlines() or [f"RAW exit {res.returncode} {res.stderr[-200:]}"])[
        -1
    ]


def special_files(tmp_path: Path) -> dict[str, Path]:
    """A FIFO with no writer, two devices, a folder and a sparse 2 GiB file."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sparse = tmp_path / "sparse.csv"
    with open(sparse, "wb") as fh:
        fh.truncate(2 * 2**30)
    return {
        "fifo": fifo,
        "zero": Path("/dev/zero"),
        "urandom": Path("/dev/urandom"),
        "folder": tmp_path,
        "sparse": sparse,
    }
