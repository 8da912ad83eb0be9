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
"""

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

#: Training sets: name -> the tasks whose cluster episodes it trains on (several: a mixture).
TRAIN_SETS: dict[str, tuple[str, ...]] = {
    "hard-0.05": ("hard-0.05",),
    "realistic-0.12": ("realistic-0.12",),
    "paper-0.12": ("paper-0.12",),
    "mix": tuple(mixture_tasks()),
}
#: Test tasks (``micro-rlhf`` joins when a corpus is given).
TEST_TASKS: tuple[str, ...] = ("hard-0.05", "hard-0.12", "realistic-0.12", "paper-0.12", "trl-gao")
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
        "seeds": 10,
        "n_jobs": 100,
        "eval_episodes": 8,
    },
}
#: The training seed: neither a test seed (0..n-1) nor a floor-tuning validation seed.
TRAIN_SEED = 100
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


def available() -> bool:
    """Whether E9 can train (stable-baselines3 and torch importable)."""
    from .learned import available as sb3_available

    return sb3_available()


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
    """The task's env kwargs at 1x price (the quick run's ``trl-gao`` is the 8-run corpus)."""
    if task == "trl-gao" and quick and curves is None:
        from evalstop_gym.corpus.packaged import corpus_path

        curves = str(corpus_path("trl_gao_quick"))
    own = curves if task in ("micro-rlhf", "trl-gao") else None
    return env_kwargs(task, 1.0, n_jobs, own)


def score_models(
    models: dict[str, Path],
    task: str,
    seeds: Sequence[int],
    kw: dict[str, Any],
) -> list[dict[str, Any]]:
    """One row per model: its normalised score on ``task`` (the suite's reference and CI)."""
    from baselines.learned import Learned, read_meta
    from baselines.policies import NoStop

    reference, ref = reference_for(kw), reference_stopper(kw)
    u0 = [play(kw, s, NoStop())["utility"] for s in seeds]
    uref = [play(kw, s, ref.policy)["utility"] for s in seeds]
    rows = []
    for name, path in models.items():
        policy, play_kw = _player(
            Learned.pretrained("hard") if name == SHIPPED else Learned(path), kw
        )
        if policy is None:
            continue
        u = [play(play_kw, s, policy)["utility"] for s in seeds]
        score = zip(("score", "score_lo", "score_hi"), normalised_score(u, u0, uref))
        diff = zip(("u_minus_u0", "u_minus_u0_lo", "u_minus_u0_hi"), paired_diff_ci(u, u0))
        rows.append(
            {
                "experiment": EXPERIMENT_ID,
                "train": name,
                "train_tasks": "+".join(TRAIN_SETS.get(name, ("hard-0.05",))),
                "train_timesteps": read_meta(path)["timesteps"],
                "test": task,
                "reference": reference.value,
                "seeds": len(seeds),
                **dict(score),
                **dict(diff),
                "utility": sum(u) / len(u),
                "utility_nostop": sum(u0) / len(u0),
                "utility_ref": sum(uref) / len(uref),
            }
        )
    return rows


def _player(model: Any, kw: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """How ``model`` plays the task of ``kw``: (policy, env kwargs); (None, kw) if it cannot.

    The model sees its own window W: the last W evals of a task with K >= W
    checkpoints, the whole history padded to W slots on a task with fewer.
    """
    from baselines.training.domain_random import PaddedPolicy
    from evalstop_gym.envs import EvalStopEnv
    from evalstop_gym.envs.wrappers import pad_observation_space

    w = int(model.meta["eval_window"])
    k = checkpoints(kw)
    play_kw = {**kw, "eval_window": min(w, k)}
    space = EvalStopEnv(**play_kw).observation_space
    policy = model if k >= w else PaddedPolicy(model, w)
    try:
        model.check_observation_space(space if k >= w else pad_observation_space(space, w))
    except ValueError:
        return None, kw
    return policy, play_kw


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

    ``curves`` (a micro-RLHF corpus JSONL) adds the ``micro-rlhf`` test task.
    """
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
        if progress is not None:
            progress(f"E9 scoring {len(models)} models on {task}")
        kw = test_kwargs(task, size["n_jobs"], curves if task == "micro-rlhf" else None, quick)
        rows += score_models(models, task, test_seeds, kw)
    return rows


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "–"
    return f"{fmt(r['score'])} [{fmt(r['score_lo'])}, {fmt(r['score_hi'])}]"


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The train x test grid of normalised scores with their 95 % CIs."""
    trains = list(dict.fromkeys(r["train"] for r in rows))
    tests = list(dict.fromkeys(r["test"] for r in rows))
    refs = {r["test"]: r["reference"] for r in rows}
    keyed = {(r["train"], r["test"]): r for r in rows}
    head = ["trained on \\ tested on"] + [f"{t} ({refs[t]})" for t in tests]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tr in trains:
        lines.append("| " + " | ".join([tr] + [_cell(keyed.get((tr, t))) for t in tests]) + " |")
    return "\n".join(lines) + "\n"


def legend(rows: Sequence[dict[str, Any]]) -> str:
    """What the table shows: the training sets, the budget, the window, the score."""
    mix = ", ".join(TRAIN_SETS["mix"])
    seeds = rows[0]["seeds"] if rows else 0
    steps = sorted({int(r["train_timesteps"]) for r in rows})
    return (
        f"PPO (shipped defaults, {'/'.join(map(str, steps))} steps, training seed {TRAIN_SEED}) "
        "trained on each row's tasks; "
        f"`mix` draws each training cluster episode from {mix}. Models see the last "
        f"{COMMON_WINDOW} evals (`paper`'s 10, padded to {COMMON_WINDOW} slots). "
        f"{seeds} test seeds per cell. {SCORE_LEGEND}"
        + (SMOKE_NOTE if max(steps, default=0) <= SIZES["quick"]["timesteps"] else "")
    )


def write_e9(out: str | Path, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """Write ``OUT/E9.csv`` (every column) and ``OUT/E9.md`` (the grid)."""
    out = Path(out)
    csv_path, md_path = out / "E9.csv", out / "E9.md"
    with atomic_open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    atomic_write(md_path, f"# E9: generalisation\n\n{legend(rows)}\n\n{markdown_table(rows)}")
    return [csv_path, md_path]


def section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's E9 section (the rows whose experiment is E9)."""
    rows = [r for r in summary if r.get("experiment") == EXPERIMENT_ID]
    if not rows:
        return []
    finite = all(math.isfinite(r["score"]) for r in rows)
    lines = ["## E9 — generalisation of learned stoppers (train × test)", "", legend(rows), ""]
    lines.append(markdown_table(rows))
    if not finite:
        lines.append("Some cells are not finite: a reference equal to NoStop on that task.\n")
    return lines


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """E9 inside ``reproduce``: train, score, write ``OUT/E9.csv`` and ``OUT/E9.md``.

    Runs when E9 is selected and learned stoppers are not switched off
    (``--no-learned``); ``--train-timesteps`` sets its budget per model too, and a
    micro-RLHF corpus (``--corpus`` or E7's ``OUT/curves``) adds that test task.
    """
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
