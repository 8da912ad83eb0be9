"""E12: which signal warns first on real runs -- the evals, the training-side signals, or both.

The paper's central claim is that eval scores are a better stopping signal than what a
trainer logs anyway (the loss, the reward model's score, the KL).  E12 measures it on
genuine RLHF runs: detectors that see only the evals (the paper's boundary), only a
training-side signal (a CUSUM on each: KL acceleration, entropy collapse, proxy-reward
rise; and a learned one on all of them), and both.

Protocol (:func:`e12`):

* the corpus's runs are split once by :func:`evalstop_gym.corpus.split.split_runs`
  (by grid cell, stratified by label); every threshold and model is fitted on the
  *train* runs, every figure is measured on the *test* runs;
* each run is seen as an RLHF job on it sees it (:func:`baselines.signals.run_observations`:
  the env's own observation rows, on the corpus task's checkpoints, the evals on the scale
  the scored task shows them: a held-out task's common map), and a detector's stop is the
  first checkpoint (before the last) at which it says stop;
* a threshold maximises recall - FPR on the train runs (Youden's J; ties: the earlier
  warning), the learned detector's on probabilities cross-fitted over train cells; every
  tuned detector is tuned a second time for the utility the suite scores (the true quality
  of the checkpoint it would deliver minus the GPU-hours it uses, at the held-out task's
  price and scale: :func:`stop_utility`), since a detector that tells hacking apart well
  need not stop where stopping pays;
* on the test runs: precision, recall, FPR (healthy runs stopped), the share of hacking
  runs warned at or before their gold peak, and the lead time (gold peak - stop; positive
  = before the peak) in progress units and in checkpoints, each with a 95 % bootstrap CI
  over runs;
* the normalised score (NoStop = 0, the Oracle = 1) through the suite's scoring on the
  held-out runs as a corpus task (:func:`heldout_task`).

The parts live in :mod:`.signals_parts` (the runs, the tuning, the detection figures, the
scores); this module runs them as E12 and keeps every name they define importable from here.
"""

# Re-exports: the parts' names stay importable from this module (its import path is the API).
# ruff: noqa: F401

from __future__ import annotations

import csv
import dataclasses
import functools
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from baselines import Cusum, EvalStop, NoStop
from baselines.changepoint import cusum_statistic
from baselines.curve_oracle import CurveOracle
from baselines.signals import (
    AnyOf,
    LearnedDetector,
    SignalCusum,
    decides_per_job,
    first_stop,
    job_statistics,
    run_observations,
    stop_flags,
)
from evalstop_gym.corpus import CurveTrace, peak_progress, resample, write_traces
from evalstop_gym.corpus.packaged import ENGLISH_CORPUS, TRL_CORPUS, load_corpus
from evalstop_gym.corpus.split import cell_of, select, split_runs
from evalstop_gym.envs.config import EvalStopConfig
from evalstop_gym.envs.tables import observed
from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import atomic_open
from evalstop_gym.sim.real_curves import GAIN, CorpusMap, corpus_map, gold_gain
from evalstop_gym.sim.signals import SIGNAL_FIELDS, logged_signals, trace_signal
from evalstop_gym.sim.workloads import RLHF, get_workload
from evalstop_gym.suite import HELDOUT_TASKS, is_heldout, suite_task

from ..plan import Experiment, Plan, ReproduceOptions
from ..scoring import (
    CURVE_ORACLE,
    EXTRA,
    NOSTOP,
    ORACLE,
    JobObs,
    Stopper,
    episode_arrays,
    job_observations,
    normalised_score,
    play,
    reference_sums,
    run_bootstrap_score,
    unit_sums,
    utility_terms,
)
from .signals_parts import detection as _detection
from .signals_parts import tuning as _tuning
from .signals_parts.detection import ID, N_BOOT, detection_row
from .signals_parts.runs import (
    Price,
    Runs,
    detector_stats,
    stat_matrix,
    stop_utility,
    stops_at,
    task_price,
    youden,
)
from .signals_parts.scores import (
    BASE_TASK,
    heldout_task,
    per_job_runs,
    score_rows,
    score_stoppers,
    train_task,
)
from .signals_parts.tuning import (
    DRIFTS,
    SIGNAL_TITLES,
    UTILITY_SUFFIX,
    Detector,
    detectors_for,
    fit_learned,
    tune_cusums,
    tune_threshold,
)

# The helpers' private names, which tests reach: assigned, since a module imports no
# other module's private name (tests/test_architecture.py).  detection_row looks up
# _first_stop and _boot in signals_parts.detection: patch them there.
_resamples = _detection._resamples
_boot = _detection._boot
_first_stop = _detection._first_stop
_eval_cusum = _tuning._eval_cusum

#: The shipped corpora E12 runs on (a later corpus joins by its packaged name).
CORPORA: tuple[str, ...] = (TRL_CORPUS, ENGLISH_CORPUS)
#: Seeds of the normalised score (the fewest a reported score uses) and with ``--quick``.
SCORE_SEEDS, QUICK_SCORE_SEEDS = 30, 6
#: What each boundary means in the table.
BOUNDARIES = ("evals", "signals", "both")
#: How a detector's threshold is chosen on the train runs: recall - FPR (Youden's J), or
#: the utility the suite scores (:func:`stop_utility`).
TUNINGS = ("J", "utility")


def e12(
    traces: Sequence[CurveTrace],
    *,
    corpus: str = "corpus",
    score_seeds: Sequence[int] = (),
    n_jobs: int | None = None,
    folder: str | os.PathLike[str] | None = None,
    n_boot: int = N_BOOT,
) -> list[dict[str, Any]]:
    """E12's rows on one corpus: every detector's held-out detection figures and score.

    Args:
        traces: The corpus (every run with gold and label).
        corpus: Its name in the rows.
        score_seeds: Seeds of the normalised score (none: no score).
        n_jobs: Jobs per scoring episode (None: the task's).
        folder: Where the held-out corpus is written for scoring (default: a temporary one).
        n_boot: Bootstrap resamples of the detection CIs.
    """
    traces = list(traces)
    if any(t.gold is None or t.label is None for t in traces):
        raise ConfigError("traces", corpus, "a corpus whose every run has gold and label")
    base = suite_task(BASE_TASK)
    k = EvalStopConfig.from_kwargs(**base).sim_config.resolved_calibration().evals_per_job
    split = split_runs(traces)
    signals = logged_signals(traces)
    common = [s for s in signals if all(trace_signal(t, s) is not None for t in traces)]
    logged = ", ".join(
        f"{s} {sum(trace_signal(t, s) is not None for t in traces)}/{len(traces)}" for s in signals
    )
    # Tuned and measured on the evals as the scored task shows them: a held-out task's
    # common map (each run's own map would hand a threshold every run's gain).
    tuning = train_task(corpus)
    scale = corpus_map(tuning["curves"]) if tuning.get("curve_scale") == "corpus" else None
    train = Runs.of(select(traces, split, "train"), k, signals, scale)
    test = Runs.of(select(traces, split, "test"), k, signals, scale)
    price = task_price(tuning)
    detectors = detectors_for(train, signals, common, (None, price))
    rows = [detection_row(d, test, n_boot) for d in detectors]
    scores: dict[str, tuple[float, float, float]] = {}
    task = ""
    if score_seeds:
        with tempfile.TemporaryDirectory() as tmp:
            where = Path(folder) if folder is not None else Path(tmp)
            where.mkdir(parents=True, exist_ok=True)
            task, kw = heldout_task(test.traces, where, corpus)
            if n_jobs is not None:
                kw["n_jobs"] = n_jobs
            scores = score_rows(detectors, kw, list(score_seeds))
    missing = [s for s in SIGNAL_FIELDS if s not in signals]
    for r in rows:
        r["corpus"] = corpus
        r["signals"] = ",".join(signals)
        r["signals_missing"] = ",".join(missing)
        r["signals_logged"] = logged
        r["n_train"] = len(train.traces)
        r["k"] = k
        sc = scores.get(r["detector"], (float("nan"),) * 3)
        r["score"], r["score_lo"], r["score_hi"] = sc
        r["score_seeds"] = len(score_seeds)
        r["score_task"] = task
    return rows


#: The columns of ``E12.csv``, in order.
COLUMNS = (
    "corpus", "boundary", "detector", "precision", "precision_lo", "precision_hi", "recall",
    "recall_lo", "recall_hi", "fpr", "fpr_lo", "fpr_hi", "warned_before_peak",
    "warned_before_peak_lo", "warned_before_peak_hi", "lead_progress", "lead_progress_lo",
    "lead_progress_hi", "lead_ckpt", "lead_ckpt_lo", "lead_ckpt_hi", "score", "score_lo",
    "score_hi", "score_seeds", "n_train", "n_test", "n_hacking", "k", "train_j", "tuning", "signals",
    "signals_missing", "signals_logged", "score_task", "params",
)  # fmt: skip


def write_e12(out: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write ``OUT/E12.csv``."""
    path = Path(out) / "E12.csv"
    with atomic_open(path, "w") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E12 on every corpus of :data:`CORPORA`: detection on held-out runs and their score."""
    n = QUICK_SCORE_SEEDS if opts.quick else SCORE_SEEDS
    rows: list[dict[str, Any]] = []
    for name in CORPORA:
        folder = Path(out) / "E12" / name
        rows += e12(
            load_corpus(name),
            corpus=name,
            score_seeds=range(n),
            n_jobs=opts.jobs_per_episode,
            folder=folder,
        )
    path = write_e12(out, rows)
    plan.report_rows += rows
    plan.header[ID] = f"detectors on held-out runs of {', '.join(CORPORA)}: {path.name}"


def _ci(r: dict[str, Any], key: str, digits: int = 2, pct: bool = False) -> str:
    v, lo, hi = r.get(key), r.get(f"{key}_lo"), r.get(f"{key}_hi")
    if v is None or not np.isfinite(v):
        return "–"
    f = 100.0 if pct else 1.0
    d = 0 if pct else digits
    if lo is None or not np.isfinite(lo):
        return f"{f * v:.{d}f}"
    return f"{f * v:.{d}f} [{f * lo:.{d}f}, {f * hi:.{d}f}]"


def section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's E12 section: one table per corpus, a row per detector."""
    rows = [s for s in summary if s.get("experiment") == ID]
    if not rows:
        return []
    lines = [
        f"## E12 — {EXPERIMENT.title}",
        "",
        "Held-out runs of the fixed split by grid cell (thresholds and models fitted on the "
        "train runs). Recall, FPR and 'warned ≤ peak' in %; lead = gold peak − stop "
        "(positive: before the peak) over the hacking runs stopped; [95 % bootstrap CI over "
        "runs]. Tuned for: recall − FPR (J) or the suite's utility on the train runs. Score: the "
        "suite's normalised score on the held-out runs (NoStop 0, its reference 1).",
        "",
    ]
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        rs = [r for r in rows if r["corpus"] == corpus]
        r0 = rs[0]
        lines += [
            f"**{corpus}**: {r0['n_train']} train / {r0['n_test']} test runs "
            f"({r0['n_hacking']} hacking), {r0['k']} checkpoints; signals (runs that "
            f"logged them): {r0['signals_logged'] or 'none'}"
            + (f" (not logged: {r0['signals_missing']})" if r0["signals_missing"] else "")
            + f"; score on {r0['score_seeds']} seeds of {r0['score_task'] or '–'}.",
            "",
            "| boundary | detector | tuned for | precision | recall % | FPR % | warned ≤ peak % | "
            "lead (progress) | lead (ckpts) | score |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        order = {t: i for i, t in enumerate(("–", *TUNINGS))}
        for r in sorted(
            rs, key=lambda r: (order.get(r["tuning"], 0), BOUNDARIES.index(r["boundary"]))
        ):
            lines.append(
                f"| {r['boundary']} | {r['detector']} | {r['tuning']} | {_ci(r, 'precision')} | "
                f"{_ci(r, 'recall', pct=True)} | {_ci(r, 'fpr', pct=True)} | "
                f"{_ci(r, 'warned_before_peak', pct=True)} | {_ci(r, 'lead_progress')} | "
                f"{_ci(r, 'lead_ckpt', 1)} | {_ci(r, 'score')} |"
            )
        lines.append("")
    return lines


EXPERIMENT = Experiment(
    ID,
    "Which signal warns first on real runs: evals, training-side signals or both",
    12,
    build,
    section=section,
    background=True,
    work="signal_detectors",
)
