"""E9's backward-induction rows: each stopper on each (task, price) cell, and the whole run.

:func:`lsm_cell_rows` scores stoppers on one cell beside its best floor family (from the
episodes' observation arrays; a stateful one is played); :func:`run_lsm_e9` trains the
models and scores them on every cell of the matrix at 1x and of the price sweep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...scoring import normalised_score, paired_diff_ci, reference_for
from .lsm_models import GENERAL, HELDOUT, LSM_TRAIN_TASKS, ROUTED, heldout_kwargs, train_lsm
from .ppo_grid import EXPERIMENT_ID, QUICK_TEST_TASKS, TEST_TASKS, test_kwargs
from .references import positions, reference_runs


def cell_kwargs(task: str, factor: float, quick: bool = False) -> dict[str, Any] | None:
    """A test cell's env kwargs (the held-out task on its test runs; None: no such task)."""
    if task == HELDOUT:
        return heldout_kwargs("test", factor)
    kw = test_kwargs(task, 100, None, quick)
    kw.pop("n_jobs")  # the suite's own episode size, as E8 plays it
    kw["gpu_hour_price"] = kw["gpu_hour_price"] * factor
    return kw


def lsm_cell_rows(
    stoppers: dict[str, Any],
    task: str,
    factor: float,
    seeds: Sequence[int],
    *,
    cache: dict[str, Any] | None = None,
    quick: bool = False,
) -> list[dict[str, Any]]:
    """One row per stopper on one (task, price) cell: score, CI, the paired difference to the
    best floor family, where it stops; the best floor's own row first.

    ``stoppers``: name -> a :class:`~baselines.backward.BackwardStopper`, told the cell's
    settings here.  Their utilities are computed from the episodes' observation arrays
    (exact for a per-job stopper: a test checks them against played episodes); a
    ``stateful`` one (:class:`~baselines.routed.RoutedStopper`) is played, in time order;
    NoStop and the reference are played (:func:`reference_runs`).
    """
    import numpy as np

    from baselines.backward import settings_for_task
    from baselines.evaluate import play_episode
    from baselines.floors import utilities
    from evalstop_gym.suite import is_heldout

    from ...scoring import (
        VALIDATION_SEEDS,
        best_floor,
        episode_arrays,
        episode_job_runs,
        run_bootstrap_diff,
        run_bootstrap_score,
        tune_floors,
        unit_sums,
        utility_terms,
    )

    kw = cell_kwargs(task, factor, quick)
    if kw is None:
        return []
    val_kw = heldout_kwargs("train", factor) if task == HELDOUT else kw
    floor = best_floor(tune_floors(val_kw, VALIDATION_SEEDS))
    refs = reference_runs(kw, seeds, cache)
    u0 = np.array([refs[str(s)]["u0"] for s in seeds])
    uref = np.array([refs[str(s)]["uref"] for s in seeds])
    settings = settings_for_task(kw)
    diffs: dict[str, list[float]] = {}
    where: dict[str, tuple[list[float], int, int]] = {}
    # Held-out real runs: CIs over the test runs, from each job's utility term.
    terms: dict[str, list[np.ndarray]] | None = {} if is_heldout(kw) else None
    for s in seeds:
        ep = episode_arrays(kw, int(s))
        k = ep.arrays.k
        base = float(utilities(np.full((1, ep.values.shape[0]), k), ep.values)[0])
        ends = {"Best floor": floor.family.ends([floor.policy], ep.arrays)[0]}
        for name, st in stoppers.items():
            st.set_settings(settings)
            if getattr(st, "stateful", False):
                # Decisions that depend on the jobs seen before: played in time order (a
                # routed stopper's predictions computed for the whole episode first).
                prime = getattr(st, "primed", None)
                if prime is not None:
                    prime(ep.arrays)
                try:
                    ends[name] = np.asarray(play_episode(st, int(s), kw)[1].ckpt_done)
                finally:
                    if prime is not None:
                        st.unprime()
            else:
                ends[name] = st.ends(ep.arrays)
        if terms is not None:
            terms.setdefault("NoStop", []).append(ep.values[:, k - 1] - ep.values[:, 0])
        for name, e in ends.items():
            if terms is not None:
                terms.setdefault(name, []).append(utility_terms(ep.values, e))
            u = float(utilities(np.asarray(e)[None, :], ep.values)[0])
            diffs.setdefault(name, []).append(u - base)
            a, h, n = positions(e, k, refs[str(s)])
            wa, wh, wn = where.get(name, ([], 0, 0))
            where[name] = (wa + a, wh + h, wn + n)
    rows = []
    u_floor = u0 + np.array(diffs["Best floor"])
    extra = {}
    if "ubayes" in refs[str(seeds[0])]:
        extra["Bayes"] = np.array([refs[str(s)]["ubayes"] for s in seeds])
    units = None
    if terms is not None:
        groups = [episode_job_runs(kw, int(s)) for s in seeds]
        units = {name: unit_sums(groups, t) for name, t in terms.items()}
        unit_ref = unit_sums(groups, [np.asarray(refs[str(s)]["tref"]) for s in seeds])
    for name in list(diffs) + list(extra):
        u = extra[name] if name in extra else u0 + np.array(diffs[name])
        sc = normalised_score(u, u0, uref)
        vs = paired_diff_ci(u, u_floor)
        if units is not None and name in units:
            sc = (sc[0], *run_bootstrap_score(units[name], units["NoStop"], unit_ref)[1:])
            vs = (vs[0], *run_bootstrap_diff(units[name], units["Best floor"], len(seeds)))
        after, stopped, healthy = where.get(name, ([], 0, 0))
        rows.append(
            {
                "experiment": EXPERIMENT_ID,
                "test": task,
                "price_factor": factor,
                "stopper": name if name != "Best floor" else f"Best floor ({floor.family.label})",
                "reference": reference_for(kw).value,
                "seeds": len(seeds),
                "score": sc[0],
                "score_lo": sc[1],
                "score_hi": sc[2],
                "minus_floor": vs[0],
                "minus_floor_lo": vs[1],
                "minus_floor_hi": vs[2],
                "ref_gain_lo": paired_diff_ci(uref, u0)[1],
                "hack_after_peak_median": float(np.median(after)) if after else float("nan"),
                "healthy_stopped_share": stopped / healthy if healthy else float("nan"),
            }
        )
    return rows


#: The backward-induction matrix's test tasks at 1x (the held-out task joins when it exists).
LSM_TEST_TASKS: tuple[str, ...] = tuple(t for t in TEST_TASKS if t != HELDOUT)
#: The general model is scored on every synthetic task at these price factors.
LSM_PRICES: tuple[float, ...] = (0.5, 1.0, 2.0)
#: ``--quick``: one per-task model on 4 episodes, the general model on 8, 2 test seeds.
#: The routed model on 10 (the fewest of the general draws that hold every regime).
LSM_QUICK = {
    "tasks": ("hard-0.05",),
    "episodes": 4,
    "general_episodes": 8,
    "routed_episodes": 10,
    "seeds": 2,
}
#: The ``learner`` field of the backward-induction rows (E9 rows too; REPORT.md's E9 section
#: shows them under the PPO grid).
LSM_LEARNER = "lsm"


def run_lsm_e9(
    out: str | Path,
    *,
    quick: bool = False,
    seeds: int = 30,
    general: str | Path | None = None,
    routed: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Train the per-task backward-induction models (and the general and routed ones, unless
    ``general`` / ``routed`` name model files), score them: rows of the matrix and of the
    general and routed models' prices (the routed one played, in time order).

    Every row of a cell shares its seeds with the cell's best floor family and its reference.
    Per-seed NoStop and reference runs are kept in ``OUT/e9_backward/refs.json``.
    """
    import json

    from baselines.backward import BackwardStopper
    from baselines.routed import RoutedStopper
    from evalstop_gym.fileio import atomic_write as write

    folder = Path(out) / "e9_backward"
    folder.mkdir(parents=True, exist_ok=True)
    tasks = LSM_QUICK["tasks"] if quick else LSM_TRAIN_TASKS
    episodes = LSM_QUICK["episodes"] if quick else None
    trained: dict[str, dict[str, Any]] = {}
    for task in tasks:
        if progress is not None:
            progress(f"E9 training the backward-induction model on {task}")
        trained[task] = train_lsm(task, folder / f"lsm-{task}.npz", episodes=episodes)
    overall = (GENERAL, ROUTED)
    stoppers = {f"lsm[{t}]": BackwardStopper(r["path"]) for t, r in trained.items()}
    for name, given, cls in ((GENERAL, general, BackwardStopper), (ROUTED, routed, RoutedStopper)):
        if given is None:
            if progress is not None:
                progress(f"E9 training the {name} backward-induction model")
            n = LSM_QUICK[f"{name}_episodes"] if quick else None
            trained[name] = train_lsm(name, folder / f"{name}.npz", episodes=n)
            stoppers[f"lsm[{name}]"] = cls(trained[name]["path"])
        else:
            stoppers[f"lsm[{name}]"] = cls(given, sha256=_pinned(Path(given), cls))
    cache_path = folder / "refs.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    test_seeds = list(range(LSM_QUICK["seeds"] if quick else seeds))
    tests = list(QUICK_TEST_TASKS if quick else LSM_TEST_TASKS)
    if heldout_kwargs("test") is not None:
        tests.append(HELDOUT)
    rows = []
    cells = [(t, 1.0) for t in tests] + [
        (t, f) for f in LSM_PRICES if f != 1.0 for t in tests if t in SUITE_SYNTHETIC
    ]
    for task, factor in cells:
        if progress is not None:
            progress(f"E9 scoring backward-induction stoppers on {task} at {factor:g}x")
        if cache_path.exists():  # runs sharing the folder add their references to it
            for key, got in json.loads(cache_path.read_text()).items():
                cache[key] = {**got, **cache.get(key, {})}
        # Off the suite's price: the general and routed models (--quick: the general one;
        # the routed one is played, seconds an episode).
        off = overall[:1] if quick else overall
        chosen = stoppers if factor == 1.0 else {f"lsm[{t}]": stoppers[f"lsm[{t}]"] for t in off}
        for r in lsm_cell_rows(chosen, task, factor, test_seeds, cache=cache, quick=quick):
            r["learner"] = LSM_LEARNER
            name = r["stopper"].removeprefix("lsm[").removesuffix("]")
            r["train_cpu_s"] = trained.get(name, {}).get("cpu_s", float("nan"))
            rows.append(r)
        write(cache_path, json.dumps(cache))
    return rows


#: The synthetic suite tasks (the general model's price sweep runs on these).
SUITE_SYNTHETIC: tuple[str, ...] = (
    "hard-0.05",
    "hard-0.12",
    "realistic-0.12",
    "paper-0.12",
    "grounded-0.05",
)


def _pinned(path: Path, cls: Any) -> str | None:
    """The pinned hash of a shipped model of stopper class ``cls`` at ``path`` (None: not
    shipped)."""
    from baselines import backward

    name = path.stem
    if path.resolve() == (backward.PRETRAINED_DIR / f"{name}.npz").resolve():
        return cls.shipped.get(name)
    return None
