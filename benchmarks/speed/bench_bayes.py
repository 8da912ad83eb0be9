"""The Bayes stopper's decisions per CPU second, beside EvalStop's on the same episode.

    python benchmarks/speed/bench_bayes.py [--reps 7] [--task hard-0.12]

One 200-job episode of a suite task (seed 0; ``hard-0.12`` by default, or e.g.
``grounded-0.05``, whose family simulates all 200 hypotheses and weighs probes),
played through ``Simulator.run`` by the Bayes stopper, by the same stopper with its
shortcut off (every decision through the full look-ahead), by the stopper with the
look-ahead's first form (a Python loop over the future checkpoints, the frozen
reference in ``tests/oracles/reference_bayes.py``, which never takes the shortcut)
and by ``KDeclineRule(2)``; process CPU time, interleaved rounds
(``timing.alternating``), min and median.  Prints decisions/s of each and the
ratios; the target is Bayes >= 0.06x EvalStop's decisions/s on ``hard-0.12``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

from timing import alternating

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's package and its frozen references

from baselines.bayes import BayesStopper  # noqa: E402
from evalstop_gym import KDeclineRule, Simulator  # noqa: E402
from evalstop_gym.suite import suite_config  # noqa: E402
from tests.oracles.reference_bayes import ReferenceBayes  # noqa: E402

TARGET = 0.06


def main() -> None:
    """Time the stoppers and print decisions/s and the ratios."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--task", default="hard-0.12")
    args = ap.parse_args()
    cfg = suite_config(args.task).sim_config
    full = copy.copy(BayesStopper.for_task(args.task))
    full._shortcut = False
    stoppers = {
        "Bayes": BayesStopper.for_task(args.task),
        "Bayes (no shortcut)": full,
        "Bayes (loop look-ahead)": ReferenceBayes.for_task(args.task),
        "EvalStop(2)": KDeclineRule(2),
    }

    def play(stopper):
        def run() -> tuple[float, float]:
            sim = Simulator(cfg, 0)
            t0 = time.process_time()
            m = sim.run(stopper)
            return m["n_decisions"], time.process_time() - t0

        return run

    res = alternating({name: play(s) for name, s in stoppers.items()}, args.reps)
    rates = {name: [d / t for d, t in runs] for name, runs in res.items()}
    print(f"{args.task}, seed 0, {args.reps} interleaved rounds")
    for name, r in rates.items():
        cpu = [t for _, t in res[name]]
        print(
            f"{name:24s} {max(r):10,.0f} decisions/s (best), {res[name][0][0]:,.0f} decisions, "
            f"episode CPU min {min(cpu):.3f} s, median {statistics.median(cpu):.3f} s"
        )

    def ratio(num: str, den: str) -> tuple[float, float]:
        best = max(rates[num]) / max(rates[den])
        med = statistics.median(a / b for a, b in zip(rates[num], rates[den]))
        return best, med

    b, m = ratio("Bayes", "EvalStop(2)")
    ok = "met" if min(b, m) >= TARGET else "NOT met"
    print(
        f"Bayes / EvalStop(2) decisions/s: best {b:.5f}, median {m:.5f} (target >= {TARGET}: {ok})"
    )
    for other in ("Bayes (no shortcut)", "Bayes (loop look-ahead)"):
        b, m = ratio("Bayes", other)
        print(f"Bayes / {other}: best {b:.2f}, median {m:.2f}")


if __name__ == "__main__":
    main()
