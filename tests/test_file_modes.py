"""Written files get the mode a plain ``open`` gives (0o666 less the umask), not 0o600.

``atomic_open`` writes through ``mkstemp``, whose files are private; every CSV, report, plot,
model and sidecar a run writes goes through it.  Each umask is tried in a fresh process,
because the umask is read once per process.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import os, sys
os.umask(int(sys.argv[2], 8))
from evalstop_gym.fileio import atomic_open, atomic_write, write_hash_record
out = sys.argv[1]
atomic_write(os.path.join(out, "a.csv"), "x,y\\n")
with atomic_open(os.path.join(out, "b.md"), "w") as fh:
    fh.write("# b\\n")
write_hash_record(os.path.join(out, "a.csv"))
print(oct(os.umask(0)))
"""


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_follow_the_umask(tmp_path: Path, umask: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), oct(umask)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert int(res.stdout.strip(), 8) == umask  # reading the umask left it as it was
    for name in ("a.csv", "b.md", "a.csv.sha256"):
        mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
        assert mode == 0o666 & ~umask, (name, oct(mode))
