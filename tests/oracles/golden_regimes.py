"""Whole-episode results of the regimes the first golden fixture predates.

``tests/oracles/golden_episodes.py`` pins the engine of commit 1524925, which had no
``hard`` calibration (step-time jitter), no heterogeneous pools, no paid
preemption/eval costs, no deprioritise action and no cluster env.  This
fixture pins those paths the same way (public API only: exact metrics as
``float.hex`` and a SHA-256 digest of every step, or of the event log and the
drawn arrays), so that speed work on them is checked bit for bit too.

``tests/data/golden_regimes.json`` was written from commit e0ed0e9 (the last
commit of issue #15's second round, before the third): with a git worktree of
that commit at REF, from the root of this repository::

    PYTHONPATH=REF:tests/oracles python tests/oracles/golden_regimes.py

Regenerate it only for a deliberate change of results, and say so in the commit.
Like ``golden_episodes``, it has a copy for machines without AVX-512
(``golden_regimes.no-avx512.json``, see :func:`golden_episodes.fixture_path`).
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
from golden_episodes import SCHEDULER_NAMES, _arrays_case, _env_case, _sim_case, fixture_path

FIXTURE = fixture_path("golden_regimes")
POOLS = "a100=32,h100=32"


def _deprioritizing(rng: np.random.Generator, env: gym.Env) -> int:
    """Continue, stop or deprioritise (0.75 / 0.1 / 0.15)."""
    u = rng.random()
    return 1 if u < 0.1 else 2 if u < 0.25 else 0


def _cluster_actions(rng: np.random.Generator, env: gym.Env) -> np.ndarray:
    """One action per slot of the cluster env, the same mix."""
    u = rng.random(env.action_space.shape)
    return np.where(u < 0.1, 1, np.where(u < 0.25, 2, 0)).astype(np.int64)


def collect() -> dict[str, dict[str, Any]]:
    """Run every golden case and return its results."""
    out: dict[str, dict[str, Any]] = {}
    for s in SCHEDULER_NAMES:
        # At load 1.5 jobs queue, so the schedulers' episodes differ (at the
        # default load these 25-40-job episodes never queue, whatever the scheduler).
        out[f"env-hard-{s}"] = _env_case(
            21, 0.15, n_jobs=40, load=1.5, calibration="hard", scheduler=s
        )
        out[f"sim-hard-{s}"] = _sim_case(22, n_jobs=80, calibration="hard", scheduler=s)
        out[f"sim-paid-{s}"] = _sim_case(23, n_jobs=80, costs="realistic", scheduler=s)
    out["env-hard-delayed"] = _env_case(
        24, 0.2, n_jobs=25, calibration="hard", reward_timing="delayed"
    )
    out["env-hard-system"] = _env_case(25, 0.2, n_jobs=25, calibration="hard", reward="system")
    out["env-deliver-best"] = _env_case(26, 0.1, n_jobs=25, deliver="best")
    out["env-paid-costs"] = _env_case(27, 0.15, n_jobs=40, load=1.5, costs="realistic")
    out["env-deprioritize"] = _env_case(
        28, 0.0, act=_deprioritizing, n_jobs=40, load=1.5, deprioritize=True, costs="realistic"
    )
    out["env-pools-first-fit"] = _env_case(29, 0.15, n_jobs=40, load=1.5, pools=POOLS)
    out["env-pools-fastest"] = _env_case(
        30, 0.15, n_jobs=40, load=1.5, pools=POOLS, placement="fastest"
    )
    out["sim-pools-hard"] = _sim_case(31, n_jobs=80, pools=POOLS, calibration="hard")
    out["env-cluster"] = _env_case(
        32, 0.0, "EvalStopCluster-v0", _cluster_actions, n_jobs=40, load=1.5
    )
    out["env-flat-hard"] = _env_case(33, 0.15, "EvalStopFlat-v0", n_jobs=25, calibration="hard")
    out["arrays-hard"] = _arrays_case(34, calibration="hard")  # with the jittered step fractions
    return out


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(collect(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
