"""EvalStopCluster-v0 against EvalStop-v0: steps and decisions per CPU second, interleaved.

    python benchmarks/speed/bench_cluster.py [--episodes 3] [--reps 7] [--max-jobs 32] [--n-jobs 300]

Both envs run whole episodes of the same seeds with the same stopper
(EvalStop, k = 2; through ``per_job_actions`` on the cluster env), unwrapped,
so the figures are of the envs themselves.  A cluster step decides a whole
epoch (usually one job: simultaneous checkpoints are rare with continuous
durations), and builds a padded observation of up to ``max_jobs`` jobs, so it
costs more than an EvalStop-v0 step; decisions/s is the like-for-like
figure (target: the cluster env at >= 0.3x EvalStop-v0's).  A third contender,
the cluster env's frozen reference (``tests/oracles/reference_cluster_env.py``,
the same episodes bit for bit), shows what the current code gains over it.
Timing: see benchmarks/speed/timing.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from timing import interleaved, ratio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's package and its frozen references

from baselines import EvalStop  # noqa: E402
from evalstop_gym.envs import EvalStopClusterEnv, EvalStopEnv, per_job_actions  # noqa: E402
from tests.oracles import reference_cluster_env  # noqa: E402


def single_env(episodes: int, n_jobs: int, counts: dict[str, int]) -> Callable[[], float]:
    """Whole EvalStop-v0 episodes; returns steps (= decisions)."""
    env, policy = EvalStopEnv(n_jobs=n_jobs), EvalStop(2)

    def run() -> float:
        steps = 0
        for seed in range(episodes):
            obs, _ = env.reset(seed=seed)
            while True:
                obs, _, term, _, _ = env.step(policy.act(obs))
                steps += 1
                if term:
                    break
        counts["single"] = steps
        return steps

    return run


def cluster_env(
    episodes: int, n_jobs: int, max_jobs: int, counts: dict[str, int], frozen: bool = False
) -> Callable[[], float]:
    """Whole EvalStopCluster-v0 episodes (or its frozen reference's); returns decisions."""
    if frozen:
        env, adapt = (
            reference_cluster_env.ReferenceClusterEnv,
            reference_cluster_env.per_job_actions,
        )
    else:
        env, adapt = EvalStopClusterEnv, per_job_actions
    env, policy = env(n_jobs=n_jobs, max_jobs=max_jobs), EvalStop(2)
    name = "reference" if frozen else "cluster"

    def run() -> float:
        steps = decisions = 0
        for seed in range(episodes):
            obs, _ = env.reset(seed=seed)
            while True:
                obs, _, term, _, info = env.step(adapt(obs, policy.act))
                steps += 1
                decisions += info["decided"]
                if term:
                    break
        counts[f"{name}_steps"], counts[f"{name}_decisions"] = steps, decisions
        return decisions

    return run


def main() -> None:
    """Print steps/s and decisions/s of both envs and their ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--max-jobs", type=int, default=32)
    ap.add_argument("--n-jobs", type=int, default=300)
    args = ap.parse_args()
    counts: dict[str, int] = {}
    episodes, n_jobs, max_jobs = args.episodes, args.n_jobs, args.max_jobs
    rates = interleaved(
        {
            "single": single_env(episodes, n_jobs, counts),
            "cluster": cluster_env(episodes, n_jobs, max_jobs, counts),
            "reference": cluster_env(episodes, n_jobs, max_jobs, counts, frozen=True),
        },
        args.reps,
    )
    assert counts["cluster_decisions"] == counts["reference_decisions"]
    per_step = counts["cluster_decisions"] / counts["cluster_steps"]
    best, med = ratio(rates, "cluster", "single")
    rbest, rmed = ratio(rates, "reference", "single")
    gbest, gmed = ratio(rates, "cluster", "reference")
    print(
        f"{episodes} episodes x {n_jobs} jobs, max_jobs={max_jobs}, "
        f"{args.reps} interleaved reps (process CPU time)"
    )
    print(f"EvalStop-v0                  decisions/s best {max(rates['single']):9.0f}")
    print(f"EvalStopCluster-v0           decisions/s best {max(rates['cluster']):9.0f}")
    print(f"  its frozen reference       decisions/s best {max(rates['reference']):9.0f}")
    print(f"  {per_step:.3f} decisions per cluster step")
    print(f"cluster / single:    ratio best {best:5.2f} median {med:5.2f}  (target >= 0.30)")
    print(f"reference / single:  ratio best {rbest:5.2f} median {rmed:5.2f}")
    print(f"cluster / reference: ratio best {gbest:5.2f} median {gmed:5.2f}")


if __name__ == "__main__":
    main()
