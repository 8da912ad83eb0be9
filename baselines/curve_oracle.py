"""``CurveOracle``: the optimal stopper that knows each job's curve but not its future noise.

A privileged upper bound, not a policy (like :class:`~baselines.oracle.Oracle`):
it reads the simulator's hidden noise-free eval curve of every job
(``sim.curves.true_eval``), so it runs through
:func:`baselines.evaluate.play_episode`'s privileged path and is kept out of
:func:`baselines.scripted_policies` and every policy list.

What it knows and what it does not
----------------------------------
It knows job j's true curve t_0..t_{K-1} and the noise scale sigma_j of its
observed evals, and it prices the job at its *type's* mean size
(``profiles[type].mean_gpu_hours()``: E[GPUs x hours] of the workload's LoRA,
DPO or RLHF jobs) with the work fraction i / K.  It does not know the future
eval noise, the job's own GPU-hours or its step-time jitter.  The
:class:`~baselines.oracle.Oracle` knows all three, so per job the Oracle's
utility term is >= this one's; a stopper behind the information boundary knows
less about the curve (the prior of :class:`~baselines.bayes.BayesStopper`),
so this is the reachable ceiling of "how much does knowing the curve buy".

The utility term of ending after checkpoint i (1-based) is
(:func:`evalstop_gym.sim.utility.stop_values`)

    S_i(m) = t_m - c i,        c = price x E[GPU-hours of the type] / K,

where m is the best *observed* checkpoint among the first i (a later one only
when strictly better, :func:`~evalstop_gym.sim.checkpoints.best_so_far`) and
its value is its *true* eval; reaching i = K delivers the final checkpoint
(S_K = t_{K-1} - c K) unless ``deliver="best"``.

The dynamic programme
---------------------
The state after checkpoint i is (m, b): the best observed checkpoint and its
observed eval b (b decides whether a future eval replaces m).  The next eval is
y = t_i + sigma z, z ~ N(0, 1) independent of the past; it becomes the best
when y > b.  The value of the state is

    W_K(m, b) = S_K(m),
    W_i(m, b) = max(S_i(m), C_i(m, b)),
    C_i(m, b) = P(y <= b) W_{i+1}(m, b) + E[W_{i+1}(i, y); y > b],

and the optimal policy continues after checkpoint i iff C_i(m, b) > S_i(m)
(a tie stops: the least compute, as the Oracle's first maximum).

Numerics.  b lives on a uniform grid over [min t - 6 sigma, max t + 6 sigma]
with spacing at most sigma / 8 (64 to :data:`MAX_GRID` points).  Backward
induction over i = K-1..1 keeps W_{i+1}(m, .) for every m <= i as a (m, grid)
array: P(y <= b) is the normal CDF at each grid point (exact up to a 1e-3
table), and the tail expectation of W_{i+1}(i, y) is the trapezoid rule on the
grid cells weighted by their normal probabilities, summed from the top (one
reverse cumulative sum serves every b), with the mass above the grid at the
last grid value.  Each step is a handful of array operations on an (i, grid)
array, so a job costs O(K^2 x grid) flops, about a millisecond.  The decision
at the actual state interpolates C_i(m, .) linearly at the observed b.  Each
job is solved once, at its first decision, and its tables are dropped when it
ends.

sigma.  On synthetic tasks sigma is the env's ``eval_noise``: exactly the
noise the simulator adds.  On corpus tasks (the env's ``curves=`` set) the
observed eval of an RLHF job is the run's recorded eval and its true eval the
run's gold curve, whose differences are not an i.i.d. draw of a known scale;
sigma_j is then the root mean square of the job's own residuals obs - true
over all its checkpoints (about zero, not about their mean: the model's mean
is the true curve).  That is a statement about the noise *scale* only, never
its realisations; the residuals of a recorded run are autocorrelated and
biased, so on corpus tasks the programme is the optimum of an i.i.d. model,
not the exact optimum.  With sigma = 0 (noise-free evals, and the synthetic
LoRA/DPO jobs of corpus tasks) the future is deterministic: the stopper
continues iff some later S_j beats S_i, so it stops at the curve's own first
optimum.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalstop_gym.errors import ConfigError, is_integer

#: Largest b grid a job's programme uses (the grid spacing is sigma / 8 up to this).
MAX_GRID = 1024
#: Smallest grid (a job whose curve spans a few sigma).
MIN_GRID = 64
#: Grid margin beyond the curve's range, in sigma.
MARGIN_SIGMA = 6.0
#: Grid points per sigma.
POINTS_PER_SIGMA = 8.0

_Z_MAX, _Z_POINTS = 9.0, 18001


@functools.cache
def _cdf_table() -> tuple[np.ndarray, np.ndarray]:
    """The standard normal CDF on [-9, 9] at spacing 1e-3 (NumPy has no erf)."""
    z = np.linspace(-_Z_MAX, _Z_MAX, _Z_POINTS)
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in z.tolist()])
    return z, cdf


def norm_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF of ``x`` (interpolated table; error < 1e-7, 0 and 1 beyond 9)."""
    z, cdf = _cdf_table()
    return np.interp(x, z, cdf)


@dataclass(frozen=True)
class JobPlan:
    """One job's solved programme: stop values and continuation values on the b grid.

    Attributes:
        true_eval: The job's noise-free curve t (K,).
        sigma: The noise scale of its observed evals.
        unit_cost: c, the price of one checkpoint's work (price x mean GPU-hours / K).
        deliver_best: Whether reaching K delivers the best observed checkpoint.
        grid: The b grid (G,), empty when sigma = 0.
        cont: ``cont[i]`` is C_i(m, grid) for m < i, shape (i, G), i = 1..K-1
            (``cont[0]`` is unused; empty when sigma = 0).
        value: W_0, the expected utility term of the optimal policy before the first eval.
    """

    true_eval: np.ndarray
    sigma: float
    unit_cost: float
    deliver_best: bool
    grid: np.ndarray
    cont: tuple[np.ndarray, ...]
    value: float

    @property
    def k(self) -> int:
        """Checkpoints of the job."""
        return len(self.true_eval)

    def stop_value(self, i: int, m: int) -> float:
        """S_i(m): the utility term of ending after checkpoint ``i`` with best ``m``."""
        t = self.true_eval
        if i == self.k and not self.deliver_best:
            return float(t[-1]) - self.unit_cost * i
        return float(t[m]) - self.unit_cost * i

    def continue_value(self, i: int, m: int, b: float) -> float:
        """C_i(m, b): the expected utility term of continuing optimally after checkpoint ``i``."""
        if self.sigma == 0.0:
            return self._deterministic_continue(i, m, b)
        return float(np.interp(b, self.grid, self.cont[i][m]))

    def stops(self, i: int, m: int, b: float) -> bool:
        """Whether the optimal policy ends the job after checkpoint ``i`` in state (m, b)."""
        if i >= self.k:
            return True
        return not self.continue_value(i, m, b) > self.stop_value(i, m)

    def _deterministic_continue(self, i: int, m: int, b: float) -> float:
        """sigma = 0: the best later S_j, the future evals being the true ones."""
        t = self.true_eval
        best_val, best, out = b, m, -math.inf
        for j in range(i, self.k):
            if t[j] > best_val:
                best_val, best = float(t[j]), j
            out = max(out, self.stop_value(j + 1, best))
        return out


def solve_job(
    true_eval: np.ndarray,
    sigma: float,
    unit_cost: float,
    deliver_best: bool,
    max_grid: int = MAX_GRID,
) -> JobPlan:
    """Backward induction of the programme in the module docstring for one job.

    Args:
        true_eval: The job's noise-free eval curve (K,).
        sigma: Standard deviation of its observed evals around the curve (>= 0).
        unit_cost: Price of one checkpoint's work, c in S_i(m) = t_m - c i.
        deliver_best: Reaching K delivers the best observed checkpoint (else the final one).
        max_grid: Largest b grid.
    """
    t = np.asarray(true_eval, dtype=float)
    k = len(t)
    if sigma == 0.0:
        plan = JobPlan(t, 0.0, float(unit_cost), deliver_best, np.empty(0), (), math.nan)
        v = -math.inf
        best_val, best = -math.inf, 0
        for j in range(k):  # the deterministic optimum: the first maximum of S_j
            if t[j] > best_val:
                best_val, best = float(t[j]), j
            v = max(v, plan.stop_value(j + 1, best))
        return JobPlan(t, 0.0, float(unit_cost), deliver_best, plan.grid, (), v)
    lo, hi = float(t.min()) - MARGIN_SIGMA * sigma, float(t.max()) + MARGIN_SIGMA * sigma
    n = int(min(max(math.ceil((hi - lo) * POINTS_PER_SIGMA / sigma) + 1, MIN_GRID), max_grid))
    grid = np.linspace(lo, hi, n)
    steps = np.arange(k + 1) * unit_cost
    # W[m] = W_{i+1}(m, grid) for the rows still reachable; W_K is S_K(m), flat in b.
    final = t - steps[k] if deliver_best else np.full(k, t[-1] - steps[k])
    w = np.repeat(final[:, None], n, axis=1)
    cont: list[np.ndarray] = [np.empty((0, n))] * k
    for i in range(k - 1, 0, -1):
        below = norm_cdf((grid - t[i]) / sigma)  # P(y <= b) for b on the grid
        tail = _tail_expectation(w[i], below)  # E[W_{i+1}(i, y); y > b]
        c_i = below * w[:i] + tail
        cont[i] = c_i
        np.maximum(c_i, (t[:i] - steps[i])[:, None], out=w[:i])
    below = norm_cdf((grid - t[0]) / sigma)
    value = float(w[0, 0] * below[0] + _tail_expectation(w[0], below)[0])
    return JobPlan(t, float(sigma), float(unit_cost), deliver_best, grid, tuple(cont), value)


def _tail_expectation(f: np.ndarray, below: np.ndarray) -> np.ndarray:
    """E[f(y); y > g_k] for every grid point g_k: trapezoid cells, the mass above at f's last value."""
    cells = 0.5 * (f[:-1] + f[1:]) * np.diff(below)
    tail = np.empty(len(f))
    top = f[-1] * (1.0 - below[-1])
    tail[-1] = top
    tail[:-1] = np.cumsum(cells[::-1])[::-1] + top
    return tail


class CurveOracle:
    """Privileged stopper: the optimal policy given each job's true curve, not its future noise.

    ``CurveOracle().bind(sim, price)`` returns the actor of one episode, whose
    ``act_pending()`` decides the simulator's pending job; pass the
    ``CurveOracle()`` itself to :func:`baselines.evaluate.play_episode`.  See
    the module docstring for the programme it solves.

    Args:
        max_grid: Largest b grid of a job's programme (64-16384).
    """

    name = "CurveOracle"
    privileged = True

    def __init__(self, max_grid: int = MAX_GRID) -> None:
        """Check the grid size."""
        if not is_integer(max_grid) or not MIN_GRID <= max_grid <= 16384:
            raise ConfigError("max_grid", max_grid, f"an integer in [{MIN_GRID}, 16384]")
        self.max_grid = int(max_grid)

    def bind(self, sim: Any, price: float) -> CurveOracleActor:
        """The actor deciding ``sim``'s pending jobs at GPU-hour ``price``."""
        return CurveOracleActor(sim, price, self.max_grid)

    def __repr__(self) -> str:
        """``CurveOracle(max_grid=...)``."""
        return f"CurveOracle(max_grid={self.max_grid})"


def job_sigmas(sim: Any) -> np.ndarray:
    """Each job's eval-noise scale: the env's ``eval_noise``, or on corpus tasks its residuals' RMS."""
    curves = sim.curves
    n = curves.true_eval.shape[0]
    if getattr(sim.config, "curves", None) is None:
        return np.full(n, float(sim.eval_noise))
    resid = curves.obs_eval - curves.true_eval
    return np.sqrt(np.nanmean(resid * resid, axis=1))


def job_unit_costs(sim: Any, price: float) -> np.ndarray:
    """c per job: ``price`` x its type's mean GPU-hours / K."""
    profiles = sim.config.resolved_workload().profiles
    per_type = np.array([p.mean_gpu_hours() for p in profiles])
    return price * per_type[np.asarray(sim.batch.job_type)] / sim.n_ckpt


class CurveOracleActor:
    """One episode's :class:`CurveOracle`: solves a job's programme at its first decision."""

    def __init__(self, sim: Any, price: float, max_grid: int = MAX_GRID) -> None:
        """Tabulate every job's sigma and unit cost; programmes are solved lazily."""
        self.sim = sim
        self.max_grid = max_grid
        self.sigma = job_sigmas(sim)
        self.unit_cost = job_unit_costs(sim, price)
        self._plans: dict[int, JobPlan] = {}

    def plan(self, jid: int) -> JobPlan:
        """Job ``jid``'s solved programme (solved on first use)."""
        plan = self._plans.get(jid)
        if plan is None:
            sim = self.sim
            plan = self._plans[jid] = solve_job(
                sim.curves.true_eval[jid],
                float(self.sigma[jid]),
                float(self.unit_cost[jid]),
                sim.deliver_best,
                self.max_grid,
            )
        return plan

    def act_pending(self) -> int:
        """1 if the job awaiting a decision should end now, given its observed evals."""
        sim = self.sim
        jid = sim.pending_job_id
        i = sim.checkpoints_done(jid)
        m = int(sim.best_observed[jid, i - 1])
        b = float(sim.curves.obs_eval[jid, m])
        # A NaN first eval is never beaten (best_so_far): as if it were +inf.
        stop = self.plan(jid).stops(i, m, b if b == b else math.inf)
        if stop or i >= sim.n_ckpt - 1:  # the job ends here or runs to its end: drop its tables
            self._plans.pop(jid, None)
        return int(stop)
