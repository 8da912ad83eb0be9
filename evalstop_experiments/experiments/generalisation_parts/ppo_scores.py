"""E9's PPO rows: every model (and the task's best floor family) scored on one test task.

:func:`model_ends` decides a stateless model's stops from the episode's observations in
one batch; :func:`score_models` makes a test column's rows (the score, the difference to
the best floor family, where each stopper stops, the score on blocks of the seeds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from baselines.training.domain_random import checkpoints

from ...scoring import (
    normalised_score,
    paired_diff_ci,
    play,
    reference_for,
    reference_stopper,
)
from .ppo_grid import COVERAGE_BLOCKS, EXPERIMENT_ID, FLOOR_ROW, NEAR_TIE, SHIPPED, TRAIN_SETS
from .references import positions


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

    from ...scoring import (
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
            a, h, n = positions(e, k, labels)
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

    from ...stats import seed_blocks

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
