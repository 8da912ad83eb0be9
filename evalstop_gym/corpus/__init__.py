"""The curve corpus: training curves of real runs, their format, loaders and analysis.

* :mod:`~evalstop_gym.corpus.format` — :class:`CurveTrace` and its JSONL file (numpy only);
* :mod:`~evalstop_gym.corpus.loaders` — TRL ``trainer_state.json`` and OpenRLHF logs;
* :mod:`~evalstop_gym.corpus.analysis` — the hacking label, peak position, resampling, Gao fit;
* :mod:`~evalstop_gym.corpus.packaged` — the corpora shipped as package data.

The programs that *make* corpora (torch, TRL) are the top-level package
:mod:`evalstop_corpora`, which imports this one and never the reverse.
"""

from __future__ import annotations

from .analysis import GaoFit, fit_gao, fit_gao_trace, label_hacking, peak_progress, resample
from .format import CurveTrace, CurveTraceError, read_traces, write_traces
from .loaders import load_openrlhf_log, load_trl_trainer_state

__all__ = [
    "CurveTrace",
    "CurveTraceError",
    "GaoFit",
    "fit_gao",
    "fit_gao_trace",
    "label_hacking",
    "load_openrlhf_log",
    "load_trl_trainer_state",
    "peak_progress",
    "read_traces",
    "resample",
    "write_traces",
]
