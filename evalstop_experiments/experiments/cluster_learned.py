"""E13: a learned cluster-level stopper on ``EvalStopCluster-v0`` against the per-job stoppers.

Does seeing the queue and the free GPUs buy anything?  Under the suite's utility
it cannot: a job's utility term (its delivered quality minus the price of its own
GPU-hours) does not depend on when it ran, so the per-job optimum is the cluster
optimum and Bayes is already the ceiling.  What the queue can buy is time: a run
stopped while others wait hands its GPUs to them.  E13 therefore fits its
stopper to the env's own exchange rate between the two, the system reward's
``time_cost`` (0.01 eval units per job-hour in the system, ``EvalStop-v0``'s
default), and measures the trade on both axes:

    J = utility - TIME_COST * sum_j JCT_j

The stopper (:class:`QueuePricedBayes`) is the Bayes stopper with a price that
moves with the queue: it stops a deciding job when continuing is not worth
``m(queue) x`` the task's GPU-hour price, ``m(q) = flat + slope * min(q, cap) / cap``.
Every Bayes decision is monotone in the price, so one posterior per observation
gives the multiplier at which it flips (:func:`critical_multiplier`), and any rule
is played from that number (memoised by the observation, a pure function of it).
The rule is learned by a grid search on training seeds (10 000 and up, pooled
over the three loads), two ways: queue-blind (``slope = 0``: one flat price for
every load) and queue-aware (the whole grid).  MaskablePPO over the 32-slot
``MultiDiscrete`` action did not fit the CPU budget of this study; the grid is
the "simpler learned rule over the cluster observation".

On the test seeds 0..n-1 at loads 0.7 / 1.0 / 1.3 every stopper plays the same
cluster episodes: NoStop, EvalStop(k=2), the best floor family (tuned on
``scoring.VALIDATION_SEEDS`` at that load), Bayes, and the two learned rules.
Reported: the normalised score (NoStop 0, Bayes 1), ΔJCT against NoStop, and
J - J(Bayes), each with its 95 % paired bootstrap CI over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.errors import ConfigError

from ..plan import Experiment, Plan, ReproduceOptions

#: The offered loads of the comparison.
LOADS: tuple[float, ...] = (0.7, 1.0, 1.3)
#: The task whose runs the cluster holds.
TASK = "hard-0.05"
#: The system reward's weight of a job-hour in the system (``EvalStopConfig.time_cost``).
TIME_COST = 0.01
#: Training episodes are seeded from here on (the test seeds are 0..n-1).
TRAIN_SEED_BASE = 10_000
#: Training seeds per load (quick: :data:`QUICK_TRAIN_SEEDS`).
TRAIN_SEEDS = 8
QUICK_TRAIN_SEEDS = 2
#: Slots of the cluster observation.
MAX_JOBS = 32
#: The rule grid: queue-blind flat multipliers, then queue slopes over a cap.
FLATS: tuple[float, ...] = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0)
SLOPES: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)
CAPS: tuple[float, ...] = (5.0, 20.0, 60.0)
#: Stoppers of the test table, in order (display names).
NOSTOP, EVALSTOP, FLOOR, BAYES = "NoStop", "EvalStop(k=2)", "Best floor", "Bayes"
BLIND, AWARE = "Learned, queue-blind", "Learned, queue-aware"


def critical_multiplier(bayes: Any, job_type: int, evals: np.ndarray) -> float:
    """The price multiple m from which ``bayes`` stops this job: it stops iff m >= the value.

    ``BayesStopper.decide`` at a price m x its own stops when no later end is worth
    its extra GPU-hours: ``E[value_j] - E[value_0] <= m c j`` for every j ahead (and
    the same with the noise-free bound first).  Each test is linear in m, so the
    flip point is ``max_j gain_j / (c j)``; the decision is the first test's or the
    second's, so the job stops from the smaller of the two.  Infinite at the last
    checkpoint (no decision there).  Only for a family whose look-ahead weighs fixed
    ends (the published regimes'): a probing policy's value is not linear in m.
    """
    if bayes._families[job_type].probe:
        raise ConfigError(
            "bayes",
            repr(bayes),
            "a Bayes stopper whose family does not probe (paper, realistic, hard)",
        )
    evals = np.asarray(evals, dtype=float)
    n = len(evals)
    if n >= bayes.k:
        return math.inf
    w, mean = bayes.lookahead_posterior(job_type, evals)
    b = int(np.argmax(evals))
    step = bayes._step_cost[job_type] * np.arange(1, bayes.k - n + 1)
    flips = []
    if bayes.deliver_best:
        bound = np.maximum(np.maximum.accumulate(mean[:, n:], axis=1), mean[:, b : b + 1])
        flips.append(float(np.max((w @ bound - w @ mean[:, b]) / step)))
    expected = w @ bayes._delivered(mean, b, float(evals[b]), n)
    flips.append(float(np.max((expected[1:] - expected[0]) / step)))
    return min(flips)


@dataclass(frozen=True)
class PriceRule:
    """The price multiple a cluster state puts on continuing: ``flat + slope * min(q, cap) / cap``."""

    flat: float = 1.0
    slope: float = 0.0
    cap: float = 1.0

    def multiplier(self, queue_length: float) -> float:
        """m for a queue of ``queue_length`` waiting jobs."""
        return self.flat + self.slope * min(float(queue_length), self.cap) / self.cap

    @property
    def queue_blind(self) -> bool:
        """Whether the rule ignores the queue."""
        return self.slope == 0.0

    def __str__(self) -> str:
        """``m = 1 + 2 min(q, 20)/20`` or ``m = 1.5``."""
        if self.queue_blind:
            return f"m = {self.flat:g}"
        return f"m = {self.flat:g} + {self.slope:g} min(q, {self.cap:g})/{self.cap:g}"


def rule_grid() -> list[PriceRule]:
    """Every candidate rule: the flat ones, then each slope x cap on a flat 1."""
    return [PriceRule(f) for f in FLATS] + [PriceRule(1.0, s, c) for s in SLOPES for c in CAPS]


class QueuePricedBayes:
    """A cluster-level stopper: Bayes on each deciding job at the price its rule gives the queue.

    ``act(obs)`` takes an ``EvalStopCluster-v0`` observation and returns its action
    (stop = 1 on a deciding slot whose critical multiplier the rule's multiple reaches,
    else 0).  The critical multipliers are memoised by the job's type and eval history
    (what they are a function of), so several rules played on one seed share them.

    Args:
        bayes: The task's :class:`~baselines.bayes.BayesStopper` (at 1x its price).
        rule: The price rule.
    """

    def __init__(self, bayes: Any, rule: PriceRule, cache: dict | None = None) -> None:
        """Play ``rule`` with ``bayes``'s posterior (``cache`` shared between rules)."""
        self.bayes, self.rule = bayes, rule
        self.cache: dict[tuple[int, bytes], float] = {} if cache is None else cache

    def reset(self) -> None:
        """Nothing to reset: every decision is rebuilt from the observation."""

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The cluster action: 1 (stop) or 0 per slot."""
        from baselines.policies import observed

        m = self.rule.multiplier(float(obs["queue_length"][0]))
        decide = obs["decide"]
        out = np.zeros(len(decide), dtype=np.int64)
        for slot in np.flatnonzero(decide > 0.5):
            job_type = int(np.argmax(obs["job_type"][slot]))
            evals = observed(obs["evals"][slot])
            key = (job_type, evals.tobytes())
            crit = self.cache.get(key)
            if crit is None:
                crit = self.cache[key] = critical_multiplier(self.bayes, job_type, evals)
            out[slot] = int(m >= crit)
        return out

    def __repr__(self) -> str:
        """``QueuePricedBayes(m = 1.5)``."""
        return f"QueuePricedBayes({self.rule})"


class PerJob:
    """A per-job stopper on the cluster observation (``per_job_actions`` on each deciding slot)."""

    def __init__(self, policy: Any) -> None:
        """Wrap ``policy`` (``reset()``, ``act(obs) -> 0/1``)."""
        self.policy = policy

    def reset(self) -> None:
        """Reset the per-job stopper."""
        self.policy.reset()

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The per-job stopper's action on every deciding slot."""
        from evalstop_gym.envs import per_job_actions

        return per_job_actions(obs, self.policy.act)


def cluster_kwargs(load: float, n_jobs: int | None = None, task: str = TASK) -> dict[str, Any]:
    """The env arguments of the task at ``load`` (and ``n_jobs`` jobs)."""
    from evalstop_gym.suite import suite_task

    kw = {**suite_task(task), "load": load}
    if n_jobs is not None:
        kw["n_jobs"] = n_jobs
    return kw


def play_cluster(kw: dict[str, Any], seed: int, policy: Any) -> dict[str, float]:
    """One cluster episode of ``policy``: utility (the return), mean and total JCT, and J."""
    import gymnasium as gym

    import evalstop_gym  # noqa: F401  (registers the envs)

    env = gym.make("EvalStopCluster-v0", disable_env_checker=True, max_jobs=MAX_JOBS, **kw)
    try:
        obs, _ = env.reset(seed=seed)
        policy.reset()
        utility, done, info = 0.0, False, {}
        while not done:
            obs, r, done, _, info = env.step(policy.act(obs))
            utility += float(r)
        n = env.unwrapped.core.sim.n_jobs
    finally:
        env.close()
    jct = float(info["episode_metrics"]["mean_jct_h"])
    return {
        "utility": utility,
        "mean_jct_h": jct,
        "objective": utility - TIME_COST * n * jct,
    }


def _fit_task(item: tuple[dict[str, Any], int]) -> list[float]:
    """J of every grid rule on one (env kwargs, training seed)."""
    from baselines.bayes import BayesStopper

    kw, seed = item
    bayes, cache = BayesStopper.from_env_kwargs(kw), {}
    return [
        play_cluster(kw, seed, QueuePricedBayes(bayes, r, cache))["objective"] for r in rule_grid()
    ]


def fit_rules(
    loads: Sequence[float], seeds: Sequence[int], n_jobs: int | None, executor: Any = None
) -> dict[str, Any]:
    """The best queue-blind and the best rule overall by J summed over loads and seeds."""
    from evalstop_gym.parallel import Executor

    items = [(cluster_kwargs(load, n_jobs), int(s)) for load in loads for s in seeds]
    per = (executor or Executor(workers=1)).map(_fit_task, items)
    total = np.sum(np.asarray(per), axis=0)
    grid = rule_grid()
    blind = max((i for i, r in enumerate(grid) if r.queue_blind), key=lambda i: (total[i], -i))
    aware = max(range(len(grid)), key=lambda i: (total[i], -i))
    return {
        "blind": grid[blind],
        "aware": grid[aware],
        "objective": {str(r): float(t) for r, t in zip(grid, total)},
        "episodes": len(items) * len(grid),
    }


def _test_task(item: tuple[dict[str, Any], int, Any, PriceRule, PriceRule]) -> dict[str, dict]:
    """Every stopper of the table on one (env kwargs, test seed)."""
    from baselines.bayes import BayesStopper
    from baselines.policies import EvalStop, NoStop

    kw, seed, floor, blind, aware = item
    bayes, cache = BayesStopper.from_env_kwargs(kw), {}
    stoppers = {
        NOSTOP: PerJob(NoStop()),
        EVALSTOP: PerJob(EvalStop(2)),
        FLOOR: PerJob(floor),
        BAYES: QueuePricedBayes(bayes, PriceRule(1.0), cache),
        BLIND: QueuePricedBayes(bayes, blind, cache),
        AWARE: QueuePricedBayes(bayes, aware, cache),
    }
    return {name: play_cluster(kw, seed, p) for name, p in stoppers.items()}


def compare(
    loads: Sequence[float],
    test_seeds: Sequence[int],
    rules: dict[str, Any],
    n_jobs: int | None,
    executor: Any = None,
) -> list[dict[str, Any]]:
    """One row per load and stopper: score, ΔJCT % and J - J(Bayes), each with its 95 % CI."""
    from evalstop_gym.parallel import Executor

    from .. import scoring

    floors = {}
    for load in loads:
        tuned = scoring.best_floor(
            scoring.tune_floors(cluster_kwargs(load, n_jobs), scoring.VALIDATION_SEEDS)
        )
        floors[load] = tuned
    items = [
        (cluster_kwargs(load, n_jobs), int(s), floors[load].policy, rules["blind"], rules["aware"])
        for load in loads
        for s in test_seeds
    ]
    played = (executor or Executor(workers=1)).map(_test_task, items)
    rows = []
    n = len(test_seeds)
    for li, load in enumerate(loads):
        runs = played[li * n : (li + 1) * n]
        col = {k: {name: np.array([r[name][k] for r in runs]) for name in runs[0]}
               for k in ("utility", "mean_jct_h", "objective")}  # fmt: skip
        u0, uref = col["utility"][NOSTOP], col["utility"][BAYES]
        jct0 = col["mean_jct_h"][NOSTOP]
        for name in runs[0]:
            score, lo, hi = scoring.normalised_score(col["utility"][name], u0, uref)
            djct = 100.0 * (col["mean_jct_h"][name] - jct0) / jct0
            d, dlo, dhi = scoring.paired_diff_ci(djct, np.zeros(n))
            j, jlo, jhi = scoring.paired_diff_ci(col["objective"][name], col["objective"][BAYES])
            shown = f"{FLOOR} ({floors[load].family.label})" if name == FLOOR else name
            rule = rules["blind"] if name == BLIND else rules["aware"] if name == AWARE else None
            rows.append(
                {
                    "experiment": "E13",
                    "load": load,
                    "stopper": shown,
                    "rule": "" if rule is None else str(rule),
                    "seeds": n,
                    "score": score,
                    "score_lo": lo,
                    "score_hi": hi,
                    "delta_jct_pct": d,
                    "delta_jct_lo": dlo,
                    "delta_jct_hi": dhi,
                    "j_vs_bayes": j,
                    "j_vs_bayes_lo": jlo,
                    "j_vs_bayes_hi": jhi,
                }
            )
    return rows


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The E13 table as Markdown lines."""
    lines = [
        "| load | stopper | score [95 % CI] | ΔJCT % [95 % CI] | J − J(Bayes) [95 % CI] |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        name = r["stopper"] + (f" ({r['rule']})" if r["rule"] else "")
        lines.append(
            f"| {r['load']:g} | {name} | {r['score']:.2f} [{r['score_lo']:.2f}, "
            f"{r['score_hi']:.2f}] | {r['delta_jct_pct']:.1f} [{r['delta_jct_lo']:.1f}, "
            f"{r['delta_jct_hi']:.1f}] | {r['j_vs_bayes']:.2f} [{r['j_vs_bayes_lo']:.2f}, "
            f"{r['j_vs_bayes_hi']:.2f}] |"
        )
    return lines


def section(summary: list[dict[str, Any]]) -> list[str]:
    """REPORT.md's E13 section: the table of the rows :func:`build` added."""
    rows = [s for s in summary if s.get("experiment") == "E13"]
    if not rows:
        return []
    return [
        f"## E13 — {EXPERIMENT.title}",
        "",
        f"Task {TASK} at three offered loads, the same cluster episodes for every stopper "
        f"({rows[0]['seeds']} test seeds). Score: NoStop 0, Bayes 1 (the suite's utility). "
        f"J = utility − {TIME_COST} × Σ JCT (the system reward's time cost), the objective "
        "the learned rules were fitted to on training seeds.",
        "",
        *table(rows),
        "",
    ]


def build(out: Path, opts: ReproduceOptions, plan: Plan) -> None:
    """Fit both rules on training seeds, then play the table on the test seeds."""
    from evalstop_gym.fileio import atomic_write

    n_train = QUICK_TRAIN_SEEDS if opts.quick else TRAIN_SEEDS
    train_seeds = range(TRAIN_SEED_BASE, TRAIN_SEED_BASE + n_train)
    jobs = opts.jobs_per_episode
    rules = fit_rules(LOADS, train_seeds, jobs, opts.executor)
    rows = compare(LOADS, range(opts.n_seeds), rules, jobs, opts.executor)
    plan.report_rows += rows
    plan.header["E13"] = (
        f"queue-blind rule {rules['blind']}, queue-aware rule {rules['aware']} "
        f"(fitted on {n_train} training seeds per load)"
    )
    atomic_write(Path(out) / "E13.md", "\n".join(section(rows)) + "\n")


def wanted(opts: ReproduceOptions, exp: Experiment) -> bool:
    """Only when named in ``--experiments`` (or ``cluster_learned=True``): it fits rules first."""
    flag = opts.cluster_learned
    if flag is not None:
        return bool(flag)
    return opts.experiments is not None and exp.id in opts.experiments


EXPERIMENT = Experiment(
    "E13",
    "A learned cluster-level stopper (queue-priced Bayes) vs the per-job stoppers",
    13,
    build,
    wanted=wanted,
    section=section,
    long=True,
    starting="fitting the cluster rules on training seeds",
    work="rule fit",
)
