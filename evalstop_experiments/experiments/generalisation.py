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


def model_ends(model: Any, jobs: Sequence[Any], window: int | None = None) -> Any:
    """(n,): the checkpoint after which a stateless SB3 model ends each job of an episode.

    ``jobs``: :func:`~evalstop_experiments.scoring.job_observations` of the episode
    (each job's observation at every decision, built as the env builds them);
    ``window``: pad each to that many slots first, as :class:`PaddedPolicy` does.  Every
    decision is made in one batch, greedily, as ``model.act`` makes it one at a
    time (a near tie, :data:`NEAR_TIE`, is re-decided by ``model.act``).  A job's end is
    its first stop, else its last checkpoint: what the played episode records, since a
    per-job stopper's decision reads its own job's observation only.
    """
    import numpy as np
    import torch
    from gymnasium import spaces

    from baselines.floors import end_checkpoints
    from evalstop_gym.envs.wrappers import pad_observation

    if getattr(model, "_jobs", None) is not None:
        raise ValueError(f"{model!r} is recurrent: its decisions depend on the job's past ones")
    obs = [o if window is None else pad_observation(o, window) for job in jobs for o in job.obs]
    if model.flatten:
        x: Any = np.stack([spaces.flatten(model._dict_space, o) for o in obs])
    else:
        x = {f: np.stack([o[f] for o in obs]) for f in obs[0]}
    policy = model.model.policy
    with torch.no_grad():
        tensor, _ = policy.obs_to_tensor(x)
        logits = policy.get_distribution(tensor).distribution.logits.cpu().numpy()
    acts = logits.argmax(axis=1)
    for i in np.flatnonzero(np.abs(logits[:, 1] - logits[:, 0]) < NEAR_TIE):
        acts[i] = model.act(obs[i])
    return end_checkpoints(acts.reshape(len(jobs), -1).astype(bool))


def score_models(
    models: dict[str, Path],
    task: str,
    seeds: Sequence[int],
    kw: dict[str, Any],
    *,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per model and one for the task's best floor family, on the same test seeds.

    Each row: the normalised score (the suite's reference; a held-out task's CI over its
    test runs), U − U0, the paired difference to the best floor family (tuned on
    :data:`~evalstop_experiments.scoring.VALIDATION_SEEDS`, a held-out task's on its
    train runs), where the stopper ends runs, and its score on :data:`COVERAGE_BLOCKS`
    blocks of the seeds.  NoStop and the reference are played; the floor's and the
    models' utilities are computed from the episode's observations (:func:`model_ends`).
    """
    import numpy as np

    from baselines.evaluate import play_episode
    from baselines.floors import utilities
    from baselines.learned import Learned, read_meta
    from baselines.policies import NoStop
    from evalstop_gym.suite import is_heldout, tuning_kwargs

    from ..scoring import (
        VALIDATION_SEEDS,
        best_floor,
        episode_arrays,
        episode_job_runs,
        job_observations,
        run_bootstrap_diff,
        run_bootstrap_score,
        tune_floors,
        unit_sums,
    )

    heldout = is_heldout(kw)
    reference, ref = reference_for(kw), reference_stopper(kw)
    floor = best_floor(tune_floors(tuning_kwargs(kw), VALIDATION_SEEDS))
    players: dict[str, tuple[Any, dict[str, Any], int | None, int]] = {}
    for name, path in models.items():
        model = Learned.pretrained("hard") if name == SHIPPED else Learned(path)
        policy, play_kw = _player(model, kw)
        if policy is not None:
            w = int(model.meta["eval_window"])
            pad = w if checkpoints(kw) < w else None
            players[name] = (model, play_kw, pad, int(read_meta(path)["timesteps"]))
    names = [FLOOR_ROW, *players]
    u0, uref = [], []
    u: dict[str, list[float]] = {n: [] for n in names}
    terms: dict[str, list[Any]] = {n: [] for n in [*names, "nostop", "ref"]}
    where: dict[str, tuple[list[float], int, int]] = {n: ([], 0, 0) for n in names}
    for s in seeds:
        row0, rec = play_episode(NoStop(), int(s), kw)
        rref = play(kw, int(s), ref.policy, job_terms=kw if heldout else None)
        ep = episode_arrays(kw, int(s))
        values, k = ep.values, ep.arrays.k
        labels = {
            "hacking": rec.hacking.astype(int),
            "peak": np.asarray(rec.peak_progress, dtype=float),
            "job_type": rec.job_type.astype(int),
        }
        base = float(utilities(np.asarray(rec.ckpt_done)[None, :], values)[0])
        rows_ = np.arange(values.shape[0])
        terms["nostop"].append(values[rows_, np.asarray(rec.ckpt_done) - 1] - values[:, 0])
        if heldout:
            terms["ref"].append(rref["job_terms"])
        u0.append(row0["utility"])
        uref.append(rref["utility"])
        ends = {FLOOR_ROW: floor.family.ends([floor.policy], ep.arrays)[0]}
        jobs: dict[str, Any] = {}
        for name, (model, play_kw, pad, _) in players.items():
            key = repr(sorted(play_kw.items()))
            if key not in jobs:
                jobs[key] = job_observations(play_kw, int(s))
            ends[name] = model_ends(model, jobs[key], pad)
        for name, e in ends.items():
            e = np.asarray(e)
            # The difference first: a model that never stops gets U0 exactly.
            u[name].append(row0["utility"] + (float(utilities(e[None, :], values)[0]) - base))
            terms[name].append(values[rows_, e - 1] - values[:, 0])
            a, h, n = _positions(e, k, labels)
            wa, wh, wn = where[name]
            where[name] = (wa + a, wh + h, wn + n)
    groups = [episode_job_runs(kw, int(s)) for s in seeds] if heldout else []
    ref_gain_lo = paired_diff_ci(uref, u0)[1]
    if heldout:
        su0, suref = unit_sums(groups, terms["nostop"]), unit_sums(groups, terms["ref"])
        ref_gain_lo = run_bootstrap_diff(suref, su0, len(seeds))[0]
    rows = []
    for name in names:
        score = normalised_score(u[name], u0, uref)
        diff = paired_diff_ci(u[name], u0)
        vs = paired_diff_ci(u[name], u[FLOOR_ROW])
        if heldout:
            su = unit_sums(groups, terms[name])
            score = run_bootstrap_score(su, su0, suref)
            diff = (diff[0], *run_bootstrap_diff(su, su0, len(seeds)))
            sf = unit_sums(groups, terms[FLOOR_ROW])
            vs = (vs[0], *run_bootstrap_diff(su, sf, len(seeds)))
        after, stopped, healthy = where[name]
        row: dict[str, Any] = {
            "experiment": EXPERIMENT_ID,
            "train": name,
            "train_tasks": "validation seeds"
            if name == FLOOR_ROW
            else "+".join(TRAIN_SETS.get(name, ("hard-0.05",))),
            "train_timesteps": players[name][3] if name in players else 0,
            "test": task,
            "reference": reference.value,
            "seeds": len(seeds),
            "score": score[0],
            "score_lo": score[1],
            "score_hi": score[2],
            "u_minus_u0": diff[0],
            "u_minus_u0_lo": diff[1],
            "u_minus_u0_hi": diff[2],
            "utility": sum(u[name]) / len(u[name]),
            "utility_nostop": sum(u0) / len(u0),
            "utility_ref": sum(uref) / len(uref),
            "floor_family": floor.family.label,
            "minus_floor": vs[0],
            "minus_floor_lo": vs[1],
            "minus_floor_hi": vs[2],
            "hack_after_peak_median": float(np.median(after)) if after else math.nan,
            "healthy_stopped_share": stopped / healthy if healthy else math.nan,
            "ref_gain_lo": ref_gain_lo,
        }
        row.update(_blocks(u[name], u0, uref))
        rows.append(row)
    return rows


def _blocks(u: Sequence[float], u0: Sequence[float], uref: Sequence[float]) -> dict[str, float]:
    """``block_<i>`` (score) and ``block_<i>_lo`` / ``_hi`` (its CI over the block's seeds) for
    :data:`COVERAGE_BLOCKS` blocks of the seeds in order (NaN: fewer than 2 seeds a block)."""
    import numpy as np

    from ..stats import seed_blocks

    out: dict[str, float] = {}
    n = len(u)
    parts = seed_blocks(n, COVERAGE_BLOCKS) if n >= 2 * COVERAGE_BLOCKS else []
    a, a0, aref = (np.asarray(x, dtype=float) for x in (u, u0, uref))
    for i in range(COVERAGE_BLOCKS):
        got = (
            normalised_score(a[parts[i]], a0[parts[i]], aref[parts[i]])
            if parts
            else (math.nan,) * 3
        )
        out.update(
            {f"block_{i + 1}": got[0], f"block_{i + 1}_lo": got[1], f"block_{i + 1}_hi": got[2]}
        )
    return out


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


def _cell(r: dict[str, Any] | None) -> str:
    """score [CI]; Δfloor [CI] (models); hacking runs' median end − peak / healthy stopped."""
    if r is None:
        return "–"
    cell = f"{fmt(r['score'])} [{fmt(r['score_lo'])}, {fmt(r['score_hi'])}]"
    if r["train"] == FLOOR_ROW:
        cell += f" ({r['floor_family']})"
    else:
        cell += f" Δfloor {fmt(r['minus_floor'])} [{fmt(r['minus_floor_lo'])}, {fmt(r['minus_floor_hi'])}]"
    if math.isfinite(r["hack_after_peak_median"]):
        share = fmt(100 * r["healthy_stopped_share"], 0)
        cell += f"; {r['hack_after_peak_median']:+.2f} / {share} %"
    return cell


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The train x test grid: each cell's score and CI, the difference to the task's best
    floor family (the first row) and where the model stops."""
    trains = list(dict.fromkeys(r["train"] for r in rows))
    tests = list(dict.fromkeys(r["test"] for r in rows))
    refs = {r["test"]: r["reference"] for r in rows}
    keyed = {(r["train"], r["test"]): r for r in rows}
    head = ["trained on \\ tested on"] + [f"{t} ({refs[t]})" for t in tests]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tr in trains:
        lines.append("| " + " | ".join([tr] + [_cell(keyed.get((tr, t))) for t in tests]) + " |")
    weak = sorted({r["test"] for r in rows if not r.get("ref_gain_lo", 1.0) > 0})
    if weak:
        lines.append(
            f"\nThe reference's gain over NoStop has a 95 % CI reaching 0 on {', '.join(weak)}: "
            "those scores are ratios of a denominator that may be 0."
        )
    return "\n".join(lines) + "\n"


def coverage_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The CI-coverage check: each model's score on blocks of the test seeds beside its CI."""
    from ..scoring import coverage_table

    checks = []
    for r in rows:
        blocks = [
            (r[f"block_{i}"], r[f"block_{i}_lo"], r[f"block_{i}_hi"])
            for i in range(1, COVERAGE_BLOCKS + 1)
        ]
        if r["train"] == FLOOR_ROW or not all(math.isfinite(b[0]) for b in blocks):
            continue
        checks.append(
            {
                "task": r["test"],
                "price_factor": 1.0,
                "stopper": r["train"],
                "seeds": r["seeds"],
                "score": r["score"],
                "score_lo": r["score_lo"],
                "score_hi": r["score_hi"],
                "blocks": blocks,
                "inside": [r["score_lo"] <= b[0] <= r["score_hi"] for b in blocks],
            }
        )
    return coverage_table(checks)


def legend(rows: Sequence[dict[str, Any]]) -> str:
    """What the table shows: the training sets, the budget, the window, the score."""
    mix = ", ".join(TRAIN_SETS["mix"])
    seeds = rows[0]["seeds"] if rows else 0
    steps = sorted({int(r["train_timesteps"]) for r in rows if r["train"] != FLOOR_ROW})
    return (
        f"PPO (shipped defaults, {'/'.join(map(str, steps))} steps, training seed {TRAIN_SEED}) "
        "trained on each row's tasks; "
        f"`mix` draws each training cluster episode from {mix}. Models see the last "
        f"{COMMON_WINDOW} evals (`paper`'s 10, padded to {COMMON_WINDOW} slots). "
        f"{seeds} test seeds per cell, 100-job episodes, 1× price. {SCORE_LEGEND} "
        f"`{FLOOR_ROW}`: the task's best floor family, tuned on the validation seeds "
        "(`trl-heldout`: on its train runs; it is scored against the CurveOracle with CIs "
        "over its test runs). Each model's "
        "cell: score [95 % CI]; Δfloor: mean utility minus the best floor's on the same "
        "seeds [95 % CI]; then the hacking RLHF runs' median stop minus true peak (progress) "
        "/ the share of healthy RLHF runs stopped before their end."
        + (SMOKE_NOTE if max(steps, default=0) <= SIZES["quick"]["timesteps"] else "")
    )


def write_e9(out: str | Path, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """Write ``OUT/E9.csv`` (every column) and ``OUT/E9.md`` (the grid, the CI coverage)."""
    out = Path(out)
    csv_path, md_path = out / "E9.csv", out / "E9.md"
    with atomic_open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    atomic_write(
        md_path,
        f"# E9: generalisation\n\n{legend(rows)}\n\n{markdown_table(rows)}\n"
        f"{coverage_markdown(rows)}",
    )
    return [csv_path, md_path]


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


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an ``E9.csv``, numbers read back as numbers."""

    def value(text: str) -> Any:
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    with open(path, newline="") as fh:
        return [{k: value(v) for k, v in r.items()} for r in csv.DictReader(fh)]


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


# ---------------------------------------------------------------------------------------
# Backward-induction stoppers (baselines.backward): per-task models and one general model

#: The backward-induction models' training seeds: disjoint from the test seeds 0..n-1,
#: the floors' validation seeds (2000-2011) and PPO's training seed.
LSM_TRAIN_SEED = 10_000
#: The general model's training seeds start here (a block of their own).
GENERAL_TRAIN_SEED = 20_000
#: Training episodes of a per-task model, and of the general model.
LSM_EPISODES = 200
GENERAL_EPISODES = 1920
#: Jobs of each general-model episode that enter the fit (a random subset; None: all).
#: Each episode draws one regime, noise and price: 1920 episodes of 50 jobs cover that
#: distribution better than 480 of 200 at the same fitting cost (development seeds
#: 3000-3029: 0.928 against 0.920 of Bayes, averaged over the synthetic tasks and prices).
GENERAL_JOBS: int | None = 50
#: The per-task models E9 trains (one row each).
LSM_TRAIN_TASKS: tuple[str, ...] = ("hard-0.05", "hard-0.12", "grounded-0.05")
#: The general model's training distribution: regimes, eval noise (log-uniform) and
#: price factor of each regime's suite price (log-uniform), drawn per episode.
GENERAL_REGIMES: tuple[str, ...] = ("hard", "realistic", "paper", "grounded")
#: How often each regime is drawn, relative to the others: ``hard`` twice, since its
#: healthy runs rise to the end while ``grounded``'s fall, and an equal mix taught the
#: model to stop them (development seeds: 14 of 15 task x price cells >= 0.85 of Bayes
#: against 10 with equal weights).
GENERAL_REGIME_WEIGHTS: tuple[int, ...] = (2, 1, 1, 1)
GENERAL_NOISE: tuple[float, float] = (0.02, 0.2)
#: Wide enough that the suite's 1/2x and 2x are inside it, not at its edges: 0.35-2.8
#: left 1/2x near the edge, where the trees had little data (development seeds
#: 3000-3029: 10 of 15 cells >= 0.85 of Bayes against 8, mean 0.890 against 0.871;
#: 0.2-5.0 9 cells, 0.890; 2880 episodes 10 cells, 0.895 at 1.5x the training CPU).
GENERAL_PRICE_FACTOR: tuple[float, float] = (0.25, 4.0)
#: The general model's regressor settings over ``baselines.backward.DEFAULT_PARAMS``: none.
#: Twice the trees of twice the leaves (200 x 31, 100 samples a leaf) reached less utility
#: on development seeds 3000-3009 (84.3 against 86.4, summed over the synthetic tasks at
#: 1/2x, 1x and 2x) at twice the training CPU.
GENERAL_PARAMS: dict[str, Any] = {}
#: Name of the general model in tables, and of its shipped file (``pretrained:general``).
GENERAL = "general"
#: Name of the routed general model (``pretrained:routed``): the general model's episodes,
#: one backward model per regime routed by regime evidence pooled over an episode's jobs
#: (:mod:`baselines.routed`).
ROUTED = "routed"
#: The held-out real-run task (its train runs never reach a test seed), when it exists.
HELDOUT = "trl-heldout"


def heldout_kwargs(split: str, factor: float = 1.0) -> dict[str, Any] | None:
    """The held-out real-run task's env kwargs on ``split`` (None: the task does not exist)."""
    from evalstop_gym.errors import ConfigError
    from evalstop_gym.suite import suite_task

    try:
        kw = suite_task(HELDOUT, split=split)  # type: ignore[call-arg]
    except (ConfigError, TypeError):
        return None
    kw["gpu_hour_price"] = kw["gpu_hour_price"] * factor
    return kw


def lsm_episodes(kw: dict[str, Any], seeds: Sequence[int]) -> list[Any]:
    """Training episodes of one task (its env kwargs) on ``seeds``."""
    from baselines.backward import TrainingEpisode, settings_for_task

    from ..scoring import episode_arrays

    # What the model is told when it is scored there: on real runs the measured noise.
    settings = settings_for_task(kw)
    out = []
    for s in seeds:
        ep = episode_arrays(kw, int(s))
        out.append(TrainingEpisode(ep.arrays, ep.values, settings))
    return out


def general_draws(
    n: int = GENERAL_EPISODES, seed: int = GENERAL_TRAIN_SEED
) -> list[tuple[str, float, float]]:
    """The (regime, eval noise, price factor) of each of :func:`general_episodes`' episodes."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pool = [
        r for r, w in zip(GENERAL_REGIMES, GENERAL_REGIME_WEIGHTS, strict=True) for _ in range(w)
    ]
    out = []
    for _ in range(n):
        cal = pool[int(rng.integers(len(pool)))]
        noise = float(np.exp(rng.uniform(*np.log(GENERAL_NOISE))))
        factor = float(np.exp(rng.uniform(*np.log(GENERAL_PRICE_FACTOR))))
        out.append((cal, noise, factor))
    return out


def general_episodes(
    n: int = GENERAL_EPISODES, seed: int = GENERAL_TRAIN_SEED, jobs: int | None = GENERAL_JOBS
) -> list[Any]:
    """``n`` episodes of the general model's distribution (:func:`general_draws`), episode e
    on seed ``seed + e``.

    ``jobs``: keep that many of each episode's jobs, drawn without replacement from
    a stream of the episode's own (None: every job).
    """
    out = []
    for e, (cal, noise, factor) in enumerate(general_draws(n, seed)):
        kw = env_kwargs(f"{cal}-{noise:.4f}", factor)
        got = lsm_episodes(kw, [seed + e])
        out += got if jobs is None else [_some_jobs(ep, jobs, seed + e) for ep in got]
    return out


def _some_jobs(ep: Any, jobs: int, seed: int) -> Any:
    """The training episode ``ep`` with ``jobs`` of its jobs (in their order), drawn by ``seed``."""
    import dataclasses

    import numpy as np

    from baselines.backward import TrainingEpisode

    n = ep.values.shape[0]
    if jobs >= n:
        return ep
    rows = np.sort(np.random.default_rng([seed, jobs]).choice(n, size=jobs, replace=False))
    a = ep.arrays
    arrays = dataclasses.replace(
        a,
        evals=a.evals[rows],
        loss=a.loss[rows],
        job_type=a.job_type[rows],
        declines=a.declines[rows],
        evals32=a.evals32[rows],
    )
    return TrainingEpisode(arrays, ep.values[rows], ep.settings)


def train_lsm(
    task: str,
    out: str | Path,
    *,
    episodes: int | None = None,
    seed: int | None = None,
    factor: float = 1.0,
) -> dict[str, Any]:
    """Train a backward-induction model on ``task`` (``"general"``: the distribution;
    ``"routed"``: a routed model of the same distribution, :func:`baselines.routed.fit_routed`);
    save it.

    Writes ``out`` (``.npz``) and its ``.sha256`` record; returns the model's path, its
    hash and the training CPU seconds (data and fit).
    """
    import time

    from baselines.backward import fit_backward, settings_for_task
    from evalstop_gym.suite import SUITE_PRICE

    t0 = time.process_time()
    if task in (GENERAL, ROUTED):
        n, s = episodes or GENERAL_EPISODES, GENERAL_TRAIN_SEED if seed is None else seed
        data = general_episodes(n, s)
        defaults = {"eval_noise": 0.08, "gpu_hour_price": SUITE_PRICE}
        tasks = {
            "jobs_per_episode": GENERAL_JOBS,
            "regimes": list(GENERAL_REGIMES),
            "regime_weights": list(GENERAL_REGIME_WEIGHTS),
            "eval_noise": list(GENERAL_NOISE),
            "price_factor": list(GENERAL_PRICE_FACTOR),
        }
    else:
        n, s = episodes or LSM_EPISODES, LSM_TRAIN_SEED if seed is None else seed
        kw = heldout_kwargs("train", factor) if task == HELDOUT else env_kwargs(task, factor)
        if kw is None:
            raise ValueError(f"task {task!r} is not available")
        data = lsm_episodes(kw, range(s, s + n))
        defaults, tasks = settings_for_task(kw), {"task": task, "price_factor": factor}
    if task == ROUTED:
        from baselines.routed import fit_routed

        model = fit_routed(
            data,
            [GENERAL_REGIMES.index(r) for r, _, _ in general_draws(n, s)],
            GENERAL_REGIMES,
            prior=GENERAL_REGIME_WEIGHTS,
            params=GENERAL_PARAMS,
            label=f"Routed[{GENERAL}]",
            record={**tasks, "episodes": n, "first_seed": s},
            default_settings=defaults,
        )
    else:
        model = fit_backward(
            data,
            grid=max(ep.arrays.k for ep in data),
            params=GENERAL_PARAMS if task == GENERAL else None,
            label=f"Backward[{task}]",
            record={**tasks, "episodes": n, "first_seed": s},
            default_settings=defaults,
        )
    seconds = time.process_time() - t0
    digest = model.save(out)
    return {"path": Path(out), "sha256": digest, "cpu_s": seconds, "episodes": n}


def cell_kwargs(task: str, factor: float, quick: bool = False) -> dict[str, Any] | None:
    """A test cell's env kwargs (the held-out task on its test runs; None: no such task)."""
    if task == HELDOUT:
        return heldout_kwargs("test", factor)
    kw = test_kwargs(task, 100, None, quick)
    kw.pop("n_jobs")  # the suite's own episode size, as E8 plays it
    kw["gpu_hour_price"] = kw["gpu_hour_price"] * factor
    return kw


def reference_runs(
    kw: dict[str, Any], seeds: Sequence[int], cache: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Per seed: NoStop's and the reference's utilities (and Bayes's on real runs), and the
    hidden labels of every job (read after the episode, for where the stoppers stop).

    ``cache`` (a dict, e.g. loaded from JSON) keeps them across runs by task and seed.
    """
    import json

    import numpy as np

    from baselines.bayes import BayesStopper
    from baselines.evaluate import play_episode
    from baselines.policies import NoStop
    from evalstop_gym.suite import is_heldout

    key = json.dumps({k: v for k, v in sorted(kw.items())}, default=str)
    store = cache.setdefault(key, {}) if cache is not None else {}
    real = reference_for(kw).value == "Oracle"
    heldout = is_heldout(kw)
    # A kept Bayes utility counts only if it was played at the noise Bayes assumes now.
    bayes = BayesStopper.from_env_kwargs(kw) if real else None
    for s in seeds:
        kept = store.get(str(s))
        if (
            kept is not None
            and (not heldout or "tref" in kept)
            and (bayes is None or kept.get("bayes_sigma") == bayes.sigma)
        ):
            continue
        row0, rec = play_episode(NoStop(), int(s), kw)
        ref = reference_stopper(kw)
        played = play(kw, int(s), ref.policy, job_terms=kw if heldout else None)
        entry = {
            "u0": row0["utility"],
            "uref": played["utility"],
            "hacking": rec.hacking.astype(int).tolist(),
            "peak": np.asarray(rec.peak_progress, dtype=float).tolist(),
            "job_type": rec.job_type.astype(int).tolist(),
        }
        if bayes is not None:
            entry["ubayes"] = play(kw, int(s), bayes)["utility"]
            entry["bayes_sigma"] = bayes.sigma
        if heldout:
            # Each job's utility term: a held-out task's CIs resample its test runs.
            entry["tref"] = np.asarray(played["job_terms"], dtype=float).tolist()
        store[str(s)] = entry
    return {str(s): store[str(s)] for s in seeds}


def _positions(ends: Any, k: int, entry: dict[str, Any]) -> tuple[list[float], int, int]:
    """(end - true peak of each hacking RLHF run, healthy RLHF runs stopped, healthy RLHF runs)."""
    import numpy as np

    from evalstop_gym.sim.workloads import RLHF

    hack = np.asarray(entry["hacking"], bool)
    rlhf = np.asarray(entry["job_type"]) == RLHF
    frac = np.asarray(ends) / k
    after = (frac - np.asarray(entry["peak"]))[hack & rlhf].tolist()
    healthy = rlhf & ~hack
    return after, int((np.asarray(ends)[healthy] < k).sum()), int(healthy.sum())


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

    from ..scoring import (
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
            a, h, n = _positions(e, k, refs[str(s)])
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


def lsm_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The backward-induction tables: the matrix at 1x, then the general and routed models' prices."""
    one = [r for r in rows if r["price_factor"] == 1.0]
    tests = list(dict.fromkeys(r["test"] for r in one))
    names = list(dict.fromkeys(r["stopper"].split(" (")[0] for r in one))
    keyed = {(r["stopper"].split(" (")[0], r["test"]): r for r in one}
    head = ["stopper \\ tested on (1x)"] + [
        f"{t} ({keyed[(names[0], t)]['reference']})" for t in tests
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in names:
        cells = [n]
        for t in tests:
            r = keyed.get((n, t))
            cells.append(_lsm_cell(r))
        lines.append("| " + " | ".join(cells) + " |")
    floors = ", ".join(
        f"{t}: {keyed[('Best floor', t)]['stopper'][12:-1]}"
        for t in tests
        if ("Best floor", t) in keyed
    )
    text = "\n".join(lines) + f"\n\nBest floor family per task: {floors}.\n"
    prices = sorted({r["price_factor"] for r in rows})
    overall = ("Best floor", f"lsm[{GENERAL}]", f"lsm[{ROUTED}]")
    gen = [r for r in rows if r["stopper"].split(" (")[0] in overall]
    if len(prices) > 1:
        head = ["task", "stopper"] + [f"{f:g}x" for f in prices]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        by = {(r["test"], r["stopper"].split(" (")[0], r["price_factor"]): r for r in gen}
        for t in dict.fromkeys(r["test"] for r in gen if r["test"] in SUITE_SYNTHETIC):
            for n in overall:
                if not any((t, n, f) in by for f in prices):
                    continue
                lines.append(
                    "| "
                    + " | ".join([t, n] + [_lsm_cell(by.get((t, n, f))) for f in prices])
                    + " |"
                )
        text += (
            "\nThe general and routed models at each price (n/a: Bayes's gain over NoStop has a CI reaching 0):\n\n"
            + "\n".join(lines)
            + "\n"
        )
    return text


def _lsm_cell(r: dict[str, Any] | None) -> str:
    """score [CI]; minus the best floor [CI]; hacking runs' median end - peak; healthy stopped."""
    if r is None:
        return "–"
    if not r["ref_gain_lo"] > 0:
        return "n/a"
    cell = f"{fmt(r['score'])} [{fmt(r['score_lo'])}, {fmt(r['score_hi'])}]"
    if not r["stopper"].startswith("Best floor") and r["stopper"] != "Bayes":
        cell += f" Δfloor {fmt(r['minus_floor'])} [{fmt(r['minus_floor_lo'])}, {fmt(r['minus_floor_hi'])}]"
    if math.isfinite(r["hack_after_peak_median"]):
        cell += (
            f"; {r['hack_after_peak_median']:+.2f} / {fmt(100 * r['healthy_stopped_share'], 0)} %"
        )
    return cell


LSM_LEGEND = (
    "Backward-induction stoppers (`baselines.backward`, Longstaff-Schwartz with scikit-learn's "
    "HistGradientBoostingRegressor): `lsm[T]` trained on task T alone "
    f"({LSM_EPISODES} episodes from seed {LSM_TRAIN_SEED}), `lsm[general]` one model over "
    f"the regimes {', '.join(GENERAL_REGIMES)} (drawn {':'.join(map(str, GENERAL_REGIME_WEIGHTS))}), eval noise {GENERAL_NOISE[0]}-{GENERAL_NOISE[1]} "
    f"and price factors {GENERAL_PRICE_FACTOR[0]}-{GENERAL_PRICE_FACTOR[1]} "
    f"({GENERAL_EPISODES} episodes of {GENERAL_JOBS} jobs from seed {GENERAL_TRAIN_SEED}), "
    "told each task's noise and price; `lsm[routed]` one model per regime on the same "
    "episodes, routed by regime evidence pooled over the jobs of an episode (played in time "
    "order). Each cell: score [95 % CI] against the reference; Δfloor: mean utility minus "
    "the best floor family's (tuned on the validation seeds) on the same seeds [95 % CI]; then "
    "the hacking runs' median stop minus true peak (progress) / the share of healthy RLHF "
    "runs stopped before their end."
)


def write_lsm(out: str | Path, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """Write ``OUT/E9_backward.csv`` (every column) and ``OUT/E9_backward.md`` (the tables)."""
    out = Path(out)
    csv_path, md_path = out / "E9_backward.csv", out / "E9_backward.md"
    with atomic_open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    seeds = rows[0]["seeds"] if rows else 0
    atomic_write(
        md_path,
        f"# E9: backward-induction stoppers across tasks\n\n{LSM_LEGEND} {seeds} test seeds.\n\n"
        + lsm_markdown(rows),
    )
    return [csv_path, md_path]


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
