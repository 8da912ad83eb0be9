"""``benchmarks/speed/timing.py`` for ``bench_bayes.py``, which still sits here.

The shared timing helpers live in ``speed/``; this loads them under their own name so
that ``from timing import alternating`` keeps working for a script run from this folder.
It goes when ``bench_bayes.py`` moves into ``speed/``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "benchmarks_speed_timing", Path(__file__).resolve().parent / "speed" / "timing.py"
)
_timing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_timing)

alternating = _timing.alternating
children_cpu = _timing.children_cpu
interleaved = _timing.interleaved
ratio = _timing.ratio
report = _timing.report
seconds_ratio_line = _timing.seconds_ratio_line
