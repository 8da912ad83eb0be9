"""EvalStopCluster-v0 against EvalStop-v0: steps and decisions per CPU second, interleaved.

    python benchmarks/bench_cluster.py [--episodes 3] [--reps 5] [--max-jobs 32] [--n-jobs 300]

Both envs run whole episodes of the same seeds with the same stopper
(EvalStop, k = 2; through ``per_job_actions`` on the cluster env), unwrapped,
so the figures are of the envs themselves.  A cluster step decides a whole
epoch (usually one job: simultaneous checkpoints are rare with continuous
durations), and builds a padded observation of up to ``max_jobs`` jobs, so it
costs more than an EvalStop-v0 step; decisions/s is the like-for-like
figure.  No target (issue #16 asks for the figures).  Timing: see
benchmarks/timing.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from timing import interleaved, ratio

from baselines import EvalStop
from evalstop_gym.envs import EvalStopClusterEnv, EvalStopEnv, per_job_actions


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
    episodes: int, n_jobs: int, max_jobs: int, counts: dict[str, int]
) -> Callable[[], float]:
    """Whole EvalStopCluster-v0 episodes; returns steps (epochs), counts decisions."""
    env, policy = EvalStopClusterEnv(n_jobs=n_jobs, max_jobs=max_jobs), EvalStop(2)

    def run() -> float:
        steps = decisions = 0
        for seed in range(episodes):
            obs, _ = env.reset(seed=seed)
            while True:
                obs, _, term, _, info = env.step(per_job_actions(obs, policy.act))
                steps += 1
                decisions += info["decided"]
                if term:
                    break
        counts["cluster_steps"], counts["cluster_decisions"] = steps, decisions
        return steps

    return run


def main() -> None:
    """Print steps/s and decisions/s of both envs and their ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-jobs", type=int, default=32)
    ap.add_argument("--n-jobs", type=int, default=300)
    args = ap.parse_args()
    counts: dict[str, int] = {}
    rates = interleaved(
        {
            "single": single_env(args.episodes, args.n_jobs, counts),
            "cluster": cluster_env(args.episodes, args.n_jobs, args.max_jobs, counts),
        },
        args.reps,
    )
    per_decision = counts["cluster_decisions"] / counts["cluster_steps"]
    rates["cluster_decisions"] = [r * per_decision for r in rates["cluster"]]
    best, med = ratio(rates, "cluster", "single")
    dbest, dmed = ratio(rates, "cluster_decisions", "single")
    print(
        f"{args.episodes} episodes x {args.n_jobs} jobs, max_jobs={args.max_jobs}, "
        f"{args.reps} interleaved reps (process CPU time)"
    )
    print(f"EvalStop-v0        steps/s (= decisions/s) best {max(rates['single']):9.0f}")
    print(f"EvalStopCluster-v0 steps/s                 best {max(rates['cluster']):9.0f}")
    print(f"EvalStopCluster-v0 decisions/s             best {max(rates['cluster_decisions']):9.0f}")
    print(f"  {per_decision:.3f} decisions per cluster step")
    print(f"cluster / single, steps:     ratio best {best:5.2f} median {med:5.2f}")
    print(f"cluster / single, decisions: ratio best {dbest:5.2f} median {dmed:5.2f}")


if __name__ == "__main__":
    main()
