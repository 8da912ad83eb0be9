"""What an E9 test cell is measured against: its played references and the hidden labels.

:func:`reference_runs`: per seed, NoStop's and the reference's utilities (Bayes's on real
runs) and every job's hidden labels, kept across runs in a cache; :func:`positions`: how
far past their true peak the hacking runs were stopped, and how many healthy runs were.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...scoring import play, reference_for, reference_stopper


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


def positions(ends: Any, k: int, entry: dict[str, Any]) -> tuple[list[float], int, int]:
    """(end - true peak of each hacking RLHF run, healthy RLHF runs stopped, healthy RLHF runs)."""
    import numpy as np

    from evalstop_gym.sim.workloads import RLHF

    hack = np.asarray(entry["hacking"], bool)
    rlhf = np.asarray(entry["job_type"]) == RLHF
    frac = np.asarray(ends) / k
    after = (frac - np.asarray(entry["peak"]))[hack & rlhf].tolist()
    healthy = rlhf & ~hack
    return after, int((np.asarray(ends)[healthy] < k).sum()), int(healthy.sum())
