"""Named benchmark tasks: ``suite_task("hard-0.12")`` returns the env kwargs of a task.

A task is ``"<calibration>-<sigma>"`` (any registered calibration, any eval
noise, e.g. ``"hard-0.12"``, ``"paper-0.02"``) or a real-curve corpus
(``"micro-rlhf"``, made locally; ``"trl-gao"``, the TRL corpus shipped with the
package).  Every task runs the heavy-RLHF workload on SRTF-Est with
``deliver="best"`` (a practitioner keeps each run's best eval checkpoint, so a
stopper is judged on the compute it frees, not on checkpoint selection), the
full eval history (``eval_window = K``) and the suite's GPU-hour price.

The price (docs/CALIBRATION.md, "The suite's price").  It is fixed by a rule:
*a GPU-hour is worth a quarter of the quality it buys in an average healthy
RLHF run*.  An average healthy run of the featured regime (``hard``) gains
E[A] = 0.6 eval units and uses E[GPUs x hours] of an RLHF job (11.2 GPUs x
11.3 h = 127 GPU-hours): compute turns into quality at 0.6 / 127 = 4.7e-3 per
GPU-hour.  At that rate every healthy run would only break even and "should
RLHF run at all" would decide the benchmark; at a quarter of it an average
healthy run is worth four times its compute at 1x and still twice at 2x, so
across the whole sweep (1/2x, 1x, 2x, :data:`PRICE_FACTORS`) running healthy
jobs pays and what a stopper adds is the compute it frees from hacking runs.
Rounded to two digits: 1.2e-3 (the env's default, 5e-4, is ~0.4x).
Held-out tasks (``"trl-heldout"``, :data:`HELDOUT_TASKS`) replay one side of a
packaged corpus's fixed train/test split under one common map and fresh
measurement noise (docs/CURVE_TRACES.md): ``suite_task("trl-heldout")`` is the
test runs, ``suite_task("trl-heldout", split="train")`` the runs to tune on.  The
``grounded`` tasks (``"grounded-0.05"``: the regime fitted to real English RLHF
runs, at their eval noise; docs/CALIBRATION.md) take the rule's own value for
their regime, 1.1e-3 (its healthy runs peak a little below base + A), and a
60 % hack share (:data:`CALIBRATION_SETTINGS`).  Every task of :data:`SUITE_TASKS`
and the shipped-corpus task is registered as ``"EvalStop-<task>-v0"``
(:func:`task_env_id`).  A first
rule, half the rate (2.4e-3), was dropped after measuring the floors: at its
2x every healthy run breaks even and stopping all RLHF runs at 10 % was as
good as any detector.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .sim.calibration import CALIBRATIONS, get_calibration
from .sim.workloads import RLHF, get_workload

if TYPE_CHECKING:
    from .envs.config import EvalStopConfig

#: The suite's price of a GPU-hour in eval units (see :func:`price_rule`).
SUITE_PRICE = 1.2e-3
#: Every result is shown at these multiples of the suite's price.
PRICE_FACTORS: tuple[float, ...] = (0.5, 1.0, 2.0)
#: Tasks of the benchmark table (real corpora join when a corpus is given).
SUITE_TASKS: tuple[str, ...] = (
    "hard-0.05",
    "hard-0.12",
    "realistic-0.12",
    "paper-0.12",
    "grounded-0.05",
)
#: Tasks featured before whose env ids stay registered, so the names users have keep
#: working: ``"grounded-0.08"`` is the grounded regime at eval noise 0.08 (the featured
#: task's noise before the regime was refitted to the English corpus).
FORMER_TASKS: tuple[str, ...] = ("grounded-0.08",)
#: Real-curve tasks and the environment variable naming their corpus (JSONL).
CORPUS_TASKS: dict[str, str] = {
    "micro-rlhf": "EVALSTOP_MICRO_RLHF_CORPUS",
    "trl-gao": "EVALSTOP_TRL_CORPUS",
}
#: Corpus tasks whose corpus ships with the package (used when no path is given).
PACKAGED_TASKS: dict[str, str] = {"trl-gao": "trl_gao"}
#: Held-out real-run tasks and the packaged corpus each replays: one common map for the
#: corpus, fresh measurement noise every episode, each job's run warped in time and its
#: gain jittered by the corpus's own between-run spreads (fresh noise alone leaves a
#: stopper that memorised the shipped runs ahead of every fair one), and one side of the
#: corpus's fixed train/test split (``split=``: "test" to score, "train" to tune and train).
#: ``"english-twin"`` plays the English twin (``english_twin``: runs drawn from a model of
#: ``english_rlhf``'s train runs, docs/SIM_TO_REAL.md) exactly as ``"english-heldout"`` plays
#: the real runs, so a stopper's two scores can be set side by side.  ``"english-twin-pool"``
#: plays the pooled twin (``english_twin_pool``: fitted by trainer on every English corpus
#: but ``english_rlhf``'s test half, at its fitted trainer mix and a 32-completion eval).
HELDOUT_TASKS: dict[str, str] = {
    "trl-heldout": "trl_gao",
    "english-heldout": "english_rlhf",
    "english-twin": "english_twin",
    "english-twin-pool": "english_twin_pool",
}
#: The env settings every held-out task adds to :data:`TASK_DEFAULTS`.
HELDOUT_SETTINGS: dict[str, Any] = {
    "calibration": "hard",
    "eval_noise": 0.0,
    "curve_scale": "corpus",
    "curve_noise": "fresh",
    "curve_warp": 1.0,
    "curve_jitter": 1.0,
}
#: The side of the split a held-out task plays unless told.
HELDOUT_DEFAULT_SPLIT = "test"
#: Settings every task shares.
TASK_DEFAULTS: dict[str, Any] = {
    "workload": "heavy-rlhf",
    "scheduler": "srtf-est",
    "deliver": "best",
    "eval_window": None,
    "reward": "utility",
}


#: Settings of the tasks of one calibration that differ from :data:`TASK_DEFAULTS`: the
#: grounded regime's RLHF runs hack so that the corpus's rule labels as many of its runs
#: as of the real corpus's (60 % drawn, the heavy-RLHF workload's share, stated here
#: because it is fitted: the English corpus's rule labels 51 % [44, 58] of its runs, the
#: regime's 48 %), and a GPU-hour costs what :func:`price_rule` gives for them, rounded to
#: two digits (1.13e-3 -> 1.1e-3, not :data:`SUITE_PRICE`: their healthy runs peak a
#: little below base + A).
CALIBRATION_SETTINGS: dict[str, dict[str, Any]] = {
    "grounded": {"hack_fraction": 0.6, "gpu_hour_price": 1.1e-3}
}


def task_hack_fraction(calibration: str) -> float:
    """Fraction of RLHF runs that hack in the tasks of ``calibration``."""
    settings = CALIBRATION_SETTINGS.get(calibration, {})
    if "hack_fraction" in settings:
        return float(settings["hack_fraction"])
    return get_workload(TASK_DEFAULTS["workload"]).hack_fraction


def _packaged(name: str) -> str | None:
    """Path of the corpus shipped for task ``name`` (None: the task has none)."""
    if name not in PACKAGED_TASKS:
        return None
    from .corpus.packaged import corpus_path

    return str(corpus_path(PACKAGED_TASKS[name]))


def price_rule(calibration: str = "hard", workload: str = "heavy-rlhf") -> float:
    """A quarter of the rate at which an average healthy RLHF run turns GPU-hours into quality.

    E[gain of a healthy run at its best checkpoint] / E[GPU-hours of an RLHF job] / 4 (the
    suite delivers each run's best checkpoint).  For a calibration whose healthy runs only
    rise, the best checkpoint is the last and the gain is the mean amplitude (exact for
    ``rise-decline``, whose healthy runs end at base + A).  Healthy runs that decline a
    little (``healthy_drop``, the ``grounded`` regime) peak below base + A: their mean best
    gain is taken over 20 000 healthy runs drawn once (seed 0) on a 1/200 progress grid.
    """
    cal = get_calibration(calibration)
    if cal.healthy_drop == (0.0, 0.0):
        gain = sum(cal.rlhf_amplitude) / 2
    else:
        import numpy as np

        from .sim.synthetic_curves import rlhf_true_curves

        grid = np.linspace(0.0, 1.0, 201)
        curves = rlhf_true_curves(cal, grid, np.zeros(20_000, bool), np.random.default_rng(0))
        gain = float(np.mean(curves.max(axis=1) - curves[:, 0]))
    return 0.25 * gain / get_workload(workload).profiles[RLHF].mean_gpu_hours()


def suite_task(name: str, curves: str | None = None, split: str | None = None) -> dict[str, Any]:
    """The env kwargs (``gym.make("EvalStop-v0", **kwargs)``) of the named task.

    Args:
        name: ``"<calibration>-<sigma>"`` (e.g. ``"hard-0.12"``), a corpus task
            (``"micro-rlhf"``, ``"trl-gao"``) or a held-out task (``"trl-heldout"``,
            :data:`HELDOUT_TASKS`).
        curves: For a corpus task, the corpus JSONL; default the path in the
            environment variable of :data:`CORPUS_TASKS` (make one with
            ``evalstop-gym curves generate --runs 60 --out DIR``), else the
            shipped corpus of :data:`PACKAGED_TASKS`.  A held-out task's corpus
            is the packaged one it names, or the one given.
        split: The side of the corpus's fixed train/test split
            (:func:`evalstop_gym.corpus.split.split_runs`) the RLHF jobs replay:
            ``"test"`` (a held-out task's default: its scores), ``"train"`` (for
            tuning and training) or ``"all"`` (a corpus task's default).  Synthetic
            tasks take none.

    Raises:
        ConfigError: an unknown name, a bad sigma or split, or a corpus task without a corpus.
    """
    kw = dict(TASK_DEFAULTS, gpu_hour_price=SUITE_PRICE)
    if split is not None and split not in ("all", "train", "test"):
        raise ConfigError("split", split, "one of ['all', 'train', 'test'] (or None)")
    if name in HELDOUT_TASKS:
        from .corpus.packaged import corpus_path

        path = curves or str(corpus_path(HELDOUT_TASKS[name]))
        if not os.path.isfile(path):
            raise ConfigError("curves", path, f"the corpus JSONL of task {name!r}")
        kw.update(HELDOUT_SETTINGS, curves=str(path), curve_split=split or HELDOUT_DEFAULT_SPLIT)
        return kw
    if name in CORPUS_TASKS:
        path = curves or os.environ.get(CORPUS_TASKS[name]) or _packaged(name)
        if not path or not os.path.isfile(path):
            raise ConfigError(
                "curves",
                path,
                f"the corpus JSONL of task {name!r}: pass curves=PATH or set "
                f"{CORPUS_TASKS[name]} (evalstop-gym curves generate --runs 60 --out DIR)",
            )
        kw.update(calibration="hard", curves=str(path), eval_noise=0.0)
        if split is not None and split != "all":
            kw["curve_split"] = split
        return kw
    cal, sep, sigma = name.rpartition("-")
    allowed = f"'<calibration>-<sigma>' with calibration in {sorted(CALIBRATIONS)}"
    if not sep or cal not in CALIBRATIONS:
        raise ConfigError(
            "task", name, f"{allowed}, or one of {sorted([*CORPUS_TASKS, *HELDOUT_TASKS])}"
        )
    if split is not None:
        raise ConfigError("split", split, f"None for the synthetic task {name!r} (no runs)")
    try:
        noise = float(sigma)
    except ValueError:
        raise ConfigError("task", name, f"{allowed} and sigma a number >= 0") from None
    if not noise >= 0 or noise == float("inf"):
        raise ConfigError("task", name, f"{allowed} and sigma a finite number >= 0")
    kw.update(calibration=cal, eval_noise=noise, **CALIBRATION_SETTINGS.get(cal, {}))
    return kw


def task_env_id(name: str) -> str:
    """The Gymnasium id under which task ``name`` is registered: ``"EvalStop-<name>-v0"``."""
    return f"EvalStop-{name}-v0"


def registered_tasks() -> tuple[str, ...]:
    """Tasks with an env id of their own: :data:`SUITE_TASKS`, shipped-corpus and held-out tasks.

    A held-out task's id plays its test runs; :data:`FORMER_TASKS` keep theirs.
    """
    return (*SUITE_TASKS, *PACKAGED_TASKS, *HELDOUT_TASKS, *FORMER_TASKS)


def is_heldout(kw: dict[str, Any]) -> bool:
    """Whether env kwargs replay one side of a corpus's split (a held-out task's)."""
    return bool(kw.get("curves")) and kw.get("curve_split", "all") != "all"


def tuning_kwargs(kw: dict[str, Any]) -> dict[str, Any]:
    """The kwargs a stopper is tuned or trained on for a task: a held-out task's train runs.

    Every other task's kwargs are returned unchanged (its floors tune on validation seeds).
    """
    return {**kw, "curve_split": "train"} if is_heldout(kw) else kw


def suite_config(name: str, curves: str | None = None, split: str | None = None) -> EvalStopConfig:
    """The named task's whole env config: :func:`suite_task`'s kwargs, every default resolved.

    What a model of the task (``BayesStopper.for_task``) reads, so that it and
    the env see the same settings, the env's defaults included.
    """
    # Imported here: ``import evalstop_gym`` does not load the env classes.
    from .envs.config import EvalStopConfig

    return EvalStopConfig.from_kwargs(**suite_task(name, curves, split))
