"""E9: do learned stoppers generalise?  A train x test table of normalised scores.

The question a platform faces: a stopper trained on one regime meets runs of
another (a different calibration, eval noise, or real curves).  E9 trains PPO
with the shipped defaults (``hyperparams/ppo.yml``: per-job episodes, gamma 1)
on each training set of :data:`TRAIN_SETS` -- one regime, or a mixture of
regimes and noise levels drawn per cluster episode
(:class:`baselines.training.domain_random.DomainRandomised`, domain randomisation) --
and scores every model on every test task of :data:`TEST_TASKS` (the synthetic
regimes and the real-curve corpora ``trl-gao``, shipped, and ``micro-rlhf``
when a corpus is given), on test seeds ``0..n-1`` that no training or
validation episode uses.

Scoring is the suite's (:mod:`evalstop_experiments.scoring`): 0 = NoStop,
1 = the Bayes stopper on synthetic tasks, the privileged Oracle on real
corpora, with a 95 % paired bootstrap CI over test seeds.  NoStop and the
reference play the task as E8 does.  Every model observes a
:data:`~baselines.training.domain_random.COMMON_WINDOW`-eval window (20: every
checkpoint of a 20-checkpoint task).  ``paper`` declares 10 checkpoints, so its
episodes are padded to that window, in training
(:class:`~baselines.training.domain_random.DomainRandomised`) and in play
(:class:`~baselines.training.domain_random.PaddedPolicy`): ten empty slots on the left,
exactly what a 20-slot window shows of a 10-checkpoint history.  Padding
changes what a model sees, not the episode: it plays the very episodes NoStop
and the reference play.

Beside every test column: the task's best floor family (every family of
:data:`baselines.floors.FLOOR_FAMILIES` tuned on the validation seeds, a held-out
task's on its train runs), each model's paired difference to it, and where each
stops (hacking RLHF runs' median stop minus true peak, the share of healthy RLHF
runs stopped).  A model's utilities come from every decision's observation of the
episode at once (:func:`model_ends`, exact for these stateless per-job models); NoStop
and the reference are played.  ``trl-heldout`` is scored on its test runs against the
CurveOracle with CIs over runs, as the suite scores it.

The parts live in :mod:`.generalisation_parts` (the PPO grid, its rows, the references,
the backward-induction models and rows, the tables); this module runs them as E9 and
keeps every name they define importable from here.
"""

# Re-exports: the parts' names stay importable from this module (its import path is the API).
# ruff: noqa: F401

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from baselines.training.domain_random import (
    COMMON_WINDOW,
    checkpoints,
    domain_kwargs,
    mixture_tasks,
)
from evalstop_gym.fileio import atomic_open, atomic_write

from ..plan import Experiment, Plan, ReproduceOptions
from ..scoring import (
    SCORE_LEGEND,
    env_kwargs,
    fmt,
    normalised_score,
    paired_diff_ci,
    play,
    reference_for,
    reference_stopper,
)
from .generalisation_parts import lsm_models as _lsm_models
from .generalisation_parts import ppo_scores as _ppo_scores
from .generalisation_parts.lsm_models import (
    GENERAL,
    GENERAL_EPISODES,
    GENERAL_JOBS,
    GENERAL_NOISE,
    GENERAL_PARAMS,
    GENERAL_PRICE_FACTOR,
    GENERAL_REGIME_WEIGHTS,
    GENERAL_REGIMES,
    GENERAL_TRAIN_SEED,
    HELDOUT,
    LSM_EPISODES,
    LSM_TRAIN_SEED,
    LSM_TRAIN_TASKS,
    ROUTED,
    general_draws,
    general_episodes,
    heldout_kwargs,
    lsm_episodes,
    train_lsm,
)
from .generalisation_parts.lsm_scores import (
    LSM_LEARNER,
    LSM_PRICES,
    LSM_QUICK,
    LSM_TEST_TASKS,
    SUITE_SYNTHETIC,
    cell_kwargs,
    lsm_cell_rows,
    run_lsm_e9,
)
from .generalisation_parts.ppo_grid import (
    COVERAGE_BLOCKS,
    EXPERIMENT_ID,
    FLOOR_ROW,
    NEAR_TIE,
    QUICK_TEST_TASKS,
    QUICK_TRAIN_SETS,
    SHIPPED,
    SIZES,
    SMOKE_NOTE,
    TEST_TASKS,
    TRAIN_SEED,
    TRAIN_SETS,
    rollout_steps,
    test_kwargs,
    train_models,
)
from .generalisation_parts.ppo_scores import model_ends, score_models
from .generalisation_parts.references import positions, reference_runs
from .generalisation_parts.tables import (
    LSM_LEGEND,
    coverage_markdown,
    legend,
    lsm_markdown,
    markdown_table,
    read_rows,
    write_e9,
    write_lsm,
)

# The helpers' old private names, which tests reach: assigned, since a module imports
# no other module's private name (tests/test_architecture.py).
_player = _ppo_scores._player
_some_jobs = _lsm_models._some_jobs
_positions = positions


def available() -> bool:
    """Whether E9 can train (stable-baselines3 and torch importable)."""
    from .learned import available as sb3_available

    return sb3_available()


def run_e9(
    out: str | Path,
    *,
    quick: bool = False,
    seeds: int | None = None,
    timesteps: int | None = None,
    curves: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Train every model of the (quick) training sets, score each on every test task; rows.

    ``curves`` (a micro-RLHF corpus JSONL) adds the ``micro-rlhf`` test task; a held-out
    task whose corpus split is not there is left out.
    """
    from evalstop_gym.errors import ConfigError

    size = SIZES["quick" if quick else "default"]
    train_sets = QUICK_TRAIN_SETS if quick else tuple(TRAIN_SETS)
    tests = list(QUICK_TEST_TASKS if quick else TEST_TASKS) + (["micro-rlhf"] if curves else [])
    models = train_models(
        out,
        train_sets,
        timesteps=timesteps or size["timesteps"],
        n_jobs=size["n_jobs"],
        eval_episodes=size["eval_episodes"],
        n_envs=size["n_envs"],
        progress=progress,
    )
    if not quick:
        from baselines.learned import PRETRAINED_DIR

        models[SHIPPED] = PRETRAINED_DIR / "hard.zip"
    test_seeds = range(seeds or size["seeds"])
    rows = []
    for task in tests:
        try:
            kw = test_kwargs(task, size["n_jobs"], curves if task == "micro-rlhf" else None, quick)
        except (ConfigError, TypeError):
            continue  # a held-out task without its corpus split
        if progress is not None:
            progress(f"E9 scoring {len(models)} models on {task}")
        rows += score_models(models, task, test_seeds, kw)
    return rows


def rescore_e9(
    out: str | Path,
    tasks: Sequence[str],
    *,
    seeds: int | None = None,
    timesteps: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Score the models a full E9 run trained into ``OUT/e9_models`` again on ``tasks``.

    For a task whose regime or corpus changed since (e.g. a refitted ``grounded``): the
    models are reused as :func:`train_models` reuses them (same training set, budget and
    seed; a missing one is trained), those tasks' rows of ``OUT/E9.csv`` are replaced (a
    new task's are added) and ``OUT/E9.csv`` and ``OUT/E9.md`` rewritten.  A later
    ``reproduce --resume`` sees E9's files changed and runs E9 again, reusing the models.
    """
    from evalstop_gym.errors import ConfigError

    size = SIZES["default"]
    unknown = [t for t in tasks if t not in TEST_TASKS]
    if unknown:
        raise ConfigError("tasks", unknown, f"E9's test tasks {', '.join(TEST_TASKS)}")
    models = train_models(
        out,
        tuple(TRAIN_SETS),
        timesteps=timesteps or size["timesteps"],
        n_jobs=size["n_jobs"],
        eval_episodes=size["eval_episodes"],
        n_envs=size["n_envs"],
        progress=progress,
    )
    from baselines.learned import PRETRAINED_DIR

    models[SHIPPED] = PRETRAINED_DIR / "hard.zip"
    path = Path(out) / "E9.csv"
    old = read_rows(path) if path.exists() else []
    fresh: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        if progress is not None:
            progress(f"E9 scoring {len(models)} models on {task}")
        kw = test_kwargs(task, size["n_jobs"], None, False)
        fresh[task] = score_models(models, task, range(seeds or size["seeds"]), kw)
    order = list(dict.fromkeys([*(r["test"] for r in old), *tasks]))
    rows = [
        r for t in order for r in (fresh[t] if t in fresh else [r for r in old if r["test"] == t])
    ]
    return write_e9(out, rows)


def _lsm_available() -> bool:
    """Whether the backward-induction rows can be trained (scikit-learn importable)."""
    import importlib.util

    return importlib.util.find_spec("sklearn") is not None


def section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's E9 section (the rows whose experiment is E9, then the backward-induction ones)."""
    rows = [r for r in summary if r.get("experiment") == EXPERIMENT_ID and "learner" not in r]
    lsm = [r for r in summary if r.get("experiment") == EXPERIMENT_ID and "learner" in r]
    out = _ppo_section(rows) if rows else []
    if lsm:
        if not out:
            out = ["## E9 — generalisation of learned stoppers (train × test)", ""]
        out += ["### Backward-induction stoppers", "", LSM_LEGEND, "", lsm_markdown(lsm)]
    return out


def _ppo_section(rows: list[dict[str, Any]]) -> list[str]:
    """The PPO grid's part of the E9 section."""
    finite = all(math.isfinite(r["score"]) for r in rows)
    lines = ["## E9 — generalisation of learned stoppers (train × test)", "", legend(rows), ""]
    lines.append(markdown_table(rows))
    lines.append(coverage_markdown(rows))
    if not finite:
        lines.append("Some cells are not finite: a reference equal to NoStop on that task.\n")
    return lines


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E9 inside ``reproduce``: train, score, write ``OUT/E9.csv`` and ``OUT/E9.md``.

    Runs when E9 is selected and learned stoppers are not switched off
    (``--no-learned``); ``--train-timesteps`` sets its budget per model too, and a
    micro-RLHF corpus (``--corpus`` or E7's ``OUT/curves``) adds that test task.
    Trained PPO models are reused by a rerun (:func:`train_models`); :func:`rescore_e9`
    scores them again on chosen tasks without the rest of E9.
    """
    lsm = _lsm_available()
    if lsm:
        lsm_rows = run_lsm_e9(out, quick=opts.quick)
        lsm_files = write_lsm(out, lsm_rows)
        plan.report_rows += lsm_rows
        plan.header["E9-backward"] = (
            f"backward-induction stoppers across tasks and prices: {lsm_files[1].name}"
        )
    else:
        plan.notes.append("E9's backward-induction rows skipped: scikit-learn is not installed.")
    if not available():
        plan.notes.append("E9 skipped: stable-baselines3 and torch are not installed.")
        return
    corpus = opts.corpus_in(out)
    rows = run_e9(out, quick=opts.quick, timesteps=opts.train_timesteps, curves=corpus)  # type: ignore[arg-type]
    files = write_e9(out, rows)
    plan.report_rows += rows
    size = SIZES["quick" if opts.quick else "default"]
    plan.header["E9"] = (
        f"learned stoppers across regimes ({opts.train_timesteps or size['timesteps']} PPO "
        f"steps per model): {files[1].name}"
    )


def _wanted(opts: ReproduceOptions, exp: Experiment) -> bool:
    return opts.wants(exp.id) and opts.learned is not False


EXPERIMENT = Experiment(
    EXPERIMENT_ID,
    "Generalisation: learned stoppers trained on one regime or a mixture, tested on others",
    9,
    build,
    wanted=_wanted,
    section=section,
    work="generalisation",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Score the backward-induction models on tasks, e.g. the held-out real-run task.

    ``python -m evalstop_experiments.experiments.generalisation --tasks trl-heldout``
    scores ``pretrained:general`` and ``pretrained:routed`` (and every ``lsm-<task>.npz`` with its record in
    ``--models``) beside the task's best floor family; writes ``OUT/E9_backward.*``.
    ``--all`` makes every backward-induction row of E9 instead (:func:`run_lsm_e9`).
    """
    import argparse
    import sys

    from baselines.backward import BackwardStopper
    from baselines.routed import RoutedStopper, load_stopper
    from evalstop_gym.errors import ConfigError

    ap = argparse.ArgumentParser(prog="python -m evalstop_experiments.experiments.generalisation")
    ap.add_argument("--tasks", default=HELDOUT, help="comma-separated tasks (default trl-heldout)")
    ap.add_argument("--seeds", type=int, default=30, help="test seeds 0..n-1 (default 30)")
    ap.add_argument("--price-factor", type=float, default=1.0)
    ap.add_argument("--models", default=None, help="a folder of lsm-<task>.npz models to add")
    ap.add_argument("--out", default="results-e9-backward")
    ap.add_argument(
        "--all",
        action="store_true",
        help="E9's backward-induction rows: train the per-task models, score them and "
        "pretrained:general and pretrained:routed on every test task at 1x and the synthetic "
        "ones at 1/2x and 2x",
    )
    args = ap.parse_args(argv)
    if args.all:
        from baselines import backward

        rows = run_lsm_e9(
            args.out,
            seeds=args.seeds,
            general=backward.PRETRAINED_DIR / f"{GENERAL}.npz",
            routed=backward.PRETRAINED_DIR / f"{ROUTED}.npz",
            progress=print,
        )
        for path in write_lsm(args.out, rows):
            print(f"wrote {path}")
        return 0
    stoppers: dict[str, Any] = {
        f"lsm[{GENERAL}]": BackwardStopper.pretrained(GENERAL, label=f"lsm[{GENERAL}]"),
        f"lsm[{ROUTED}]": RoutedStopper.pretrained(ROUTED, label=f"lsm[{ROUTED}]"),
    }
    for path in sorted(Path(args.models).glob("lsm-*.npz")) if args.models else []:
        name = f"lsm[{path.stem[4:]}]"
        if name in stoppers:  # the shipped models' rows keep their own names
            err = ConfigError(
                "models",
                str(path),
                f"a file not named {path.name}: {name} is a shipped model's row",
            )
            print(f"error: {err}", file=sys.stderr)
            return 2
        stoppers[name] = load_stopper(path)
    rows = []
    for task in args.tasks.split(","):
        rows += lsm_cell_rows(stoppers, task, args.price_factor, list(range(args.seeds)))
    if not rows:
        print(f"no rows: none of {args.tasks} exists")
        return 1
    for r in rows:
        r["learner"] = LSM_LEARNER
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in write_lsm(out, rows):
        print(f"wrote {path}")
    print(lsm_markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
