"""E9's PPO grid: the training sets and test tasks, the budgets, and the models trained on them.

:data:`TRAIN_SETS` x :data:`TEST_TASKS` (and the ``--quick`` subsets), the :data:`SIZES` of
a run, :func:`train_models` (train or reuse one PPO model per training set) and
:func:`test_kwargs` (a test task's env kwargs).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from baselines.training.domain_random import (
    COMMON_WINDOW,
    domain_kwargs,
    mixture_tasks,
)

from ...scoring import env_kwargs

#: Training sets: name -> the tasks whose cluster episodes it trains on (several: a mixture).
TRAIN_SETS: dict[str, tuple[str, ...]] = {
    "hard-0.05": ("hard-0.05",),
    "realistic-0.12": ("realistic-0.12",),
    "paper-0.12": ("paper-0.12",),
    "mix": tuple(mixture_tasks()),
}
#: Test tasks (``micro-rlhf`` joins when a corpus is given).
TEST_TASKS: tuple[str, ...] = (
    "hard-0.05",
    "hard-0.12",
    "realistic-0.12",
    "paper-0.12",
    "grounded-0.05",
    "trl-gao",
    "trl-heldout",
)
#: ``--quick``: two training sets, three test tasks (the 8-run TRL corpus).
QUICK_TRAIN_SETS: tuple[str, ...] = ("hard-0.05", "mix")
QUICK_TEST_TASKS: tuple[str, ...] = ("hard-0.12", "paper-0.12", "trl-gao")
#: Budgets: PPO steps per model, training envs (None: the zoo file's), test seeds, jobs per
#: episode, validation episodes.  Quick trains one 512-step rollout: a smoke run, not a result.
SIZES: dict[str, dict[str, Any]] = {
    "quick": {"timesteps": 512, "n_envs": 1, "seeds": 2, "n_jobs": 30, "eval_episodes": 1},
    "default": {
        "timesteps": 100_000,
        "n_envs": None,
        "seeds": 30,
        "n_jobs": 100,
        "eval_episodes": 8,
    },
}
#: The training seed: neither a test seed (0..n-1) nor a floor-tuning validation seed.
TRAIN_SEED = 100
#: The CI-coverage check: the test seeds in this many blocks, each scored alone.
COVERAGE_BLOCKS = 3
#: The grid's row of each task's best floor family (tuned on the validation seeds).
FLOOR_ROW = "Best floor"
#: A decision whose two action logits are closer than this is re-decided one observation at
#: a time, as ``Learned.act`` decides it: batched and single matrix products may differ in
#: their last bits, and only a near tie could flip on that.
NEAR_TIE = 1e-3
#: The full run's extra row: the shipped ``Learned.pretrained("hard")`` (trained on
#: ``hard-0.05`` with the whole 20-eval history, 150k steps), played like the others.
SHIPPED = "hard-0.05 (shipped, all evals)"
EXPERIMENT_ID = "E9"
#: Said under a quick table: its models have had one rollout, so their rows say nothing.
SMOKE_NOTE = (
    " **Quick run: one 512-step rollout and one PPO update per model (from the same"
    " seeded weights), too little to learn when to stop: such models continue every"
    " run and score 0. A smoke test of the pipeline, not a result.**"
)


def rollout_steps(n_envs: int | None) -> int:
    """Env steps PPO collects before its first update: the zoo file's ``n_steps`` x envs."""
    from baselines.training.zoo import load_zoo_config

    conf = load_zoo_config("ppo")
    return int(conf["n_steps"]) * int(n_envs or conf["n_envs"])


def train_models(
    out: str | Path,
    train_sets: Sequence[str],
    *,
    timesteps: int,
    n_jobs: int,
    eval_episodes: int,
    n_envs: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Path]:
    """Train (or reuse) one PPO model per training set into ``OUT/e9_models``; name -> file.

    A model is reused when its file, hash record and label (training set and
    budget) are there: a rerun scores what it trained.

    Periodic evaluations come at least one rollout apart: one taken during the
    first rollout scores the seeded initial weights, the same for every
    training set, and keeping the best evaluated model would then keep those
    (every quick model was one network).  A budget of one rollout keeps the
    last model, the one its update made.
    """
    from baselines.learned import read_meta
    from baselines.training import train
    from baselines.training.domain_random import DomainRandomised

    folder = Path(out) / "e9_models"
    rollout = rollout_steps(n_envs)
    keep_best = timesteps > rollout
    kept = "best evaluated" if keep_best else "last"
    models = {}
    for name in train_sets:
        tasks = TRAIN_SETS[name]
        domains = domain_kwargs(tasks, n_jobs=n_jobs, eval_window=COMMON_WINDOW)
        label = f"E9 {name}, window {COMMON_WINDOW}, {timesteps} steps, {n_envs} envs, {n_jobs} jobs, seed {TRAIN_SEED}, {kept} kept"
        path = folder / f"ppo-{name}.zip"
        if path.exists() and Path(f"{path}.sha256").exists() and read_meta(path)["label"] == label:
            models[name] = path
            continue
        if progress is not None:
            progress(f"E9 training PPO on {name} ({timesteps} steps)")
        # A mixture, or a narrower task padded to the common window.
        custom = len(domains) > 1 or domains[0]["eval_window"] < COMMON_WINDOW
        res = train(
            path,
            algo="ppo",
            timesteps=timesteps,
            n_envs=n_envs,
            seed=TRAIN_SEED,
            env_kwargs=domains[0],
            make_base_env=(
                functools.partial(DomainRandomised, domains, window=COMMON_WINDOW)
                if custom
                else None
            ),
            eval_freq=max(timesteps // 5, rollout),
            keep_best=keep_best,
            eval_episodes=eval_episodes,
            progress=False,
            label=label,
        )
        models[name] = res.path
    return models


def test_kwargs(task: str, n_jobs: int, curves: str | None, quick: bool) -> dict[str, Any]:
    """The task's env kwargs at 1x price (the quick run's ``trl-gao`` is the 8-run corpus).

    A held-out real-run task (``trl-heldout``) replays its test runs.
    """
    from evalstop_gym.suite import HELDOUT_TASKS

    if task in HELDOUT_TASKS:
        return env_kwargs(task, 1.0, n_jobs, split="test")
    if task == "trl-gao" and quick and curves is None:
        from evalstop_gym.corpus.packaged import corpus_path

        curves = str(corpus_path("trl_gao_quick"))
    own = curves if task in ("micro-rlhf", "trl-gao") else None
    return env_kwargs(task, 1.0, n_jobs, own)
