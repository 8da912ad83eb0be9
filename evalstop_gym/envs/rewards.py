"""The env's rewards: one object per mode, built for each episode.

* :class:`DenseUtility` (``reward="utility"``, ``reward_timing="dense"``): a
  continue pays V_{i+1} - V_i of the decided job, a stop pays 0.
* :class:`DelayedUtility` (``reward_timing="delayed"``): each job pays its
  whole V_end - V_1 when it leaves the cluster.
* :class:`SystemReward` (``reward="system"``): minus the time cost of the jobs
  in system plus the weighted quality of the jobs delivered, as time passes,
  from the first decision on: the return is ``-time_cost * (sum JCT - A_0) +
  quality_weight * sum Q(delivered)``, A_0 the jobs-in-system area before the
  first decision (:meth:`SystemReward.begin` drops it).

``EvalStopEnv``'s docstring (Rewards) gives the formulas and the closed form of
the return.  An object is made by :func:`make_reward` once the episode's
simulator is built; the core calls :meth:`continue_value` before a decision
(``dense`` modes) or :meth:`collect` after it, and reads :meth:`parts` (the
return's components) at the episode's end.
"""

from __future__ import annotations

from array import array

import numpy as np

from ..sim.engine import Simulator
from ..sim.utility import continue_gains, delivered_quality
from .config import EvalStopConfig


def _lookup(values: np.ndarray) -> array[float]:
    """A per-episode float64 table, flattened row by row into an array of doubles.

    Read one scalar at a time, job j's entry i of an (n, K) table at ``j * K + i``: a
    flat array of doubles is one object over one buffer, so a lookup touches the
    array and the one cache line it reads (a memoryview of a 2-D NumPy array adds
    the view's own lines and a tuple index); the vector env steps hundreds of
    episodes in turn, whose lookups no longer all fit the cache.
    """
    return array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())


class Reward:
    """What a reward mode pays, and the return's components it accumulates.

    Attributes:
        dense: Paid decision by decision (:meth:`continue_value`); else
            collected after each decision (:meth:`collect`).
        quality: Delivered quality paid so far.
        gpu_cost: Minus the GPU bill paid so far.
        time_in_system: Minus the time cost paid so far.
    """

    dense = False

    def __init__(self, sim: Simulator) -> None:
        """Start paying for the episode of ``sim``."""
        self.sim = sim
        self.quality = self.gpu_cost = self.time_in_system = 0.0

    def begin(self) -> None:
        """Called once the episode has reached its first decision."""

    def continue_value(self, jid: int, ckpt: int) -> float:
        """The reward of continuing job ``jid`` after its checkpoint ``ckpt`` (dense modes)."""
        raise NotImplementedError(f"{type(self).__name__} is not paid per decision")

    def collect(self) -> float:
        """The reward earned since the previous call (modes that are not dense)."""
        raise NotImplementedError(f"{type(self).__name__} is paid per decision")

    def parts(self) -> dict[str, float]:
        """The return's components so far; their sum is the return."""
        return {
            "quality": self.quality,
            "gpu_cost": self.gpu_cost,
            "time_in_system": self.time_in_system,
        }


class DenseUtility(Reward):
    """``reward="utility"``, paid decision by decision: a continue pays V_{i+1} - V_i."""

    dense = True

    def __init__(self, sim: Simulator, gpu_hour_price: float) -> None:
        """Tabulate the episode's continue gains and per-interval GPU costs."""
        super().__init__(sim)
        c, b = sim.curves, sim.batch
        n, k = c.true_eval.shape
        self._k = k
        if sim.step_frac is None:
            # The same float operations, in the same order, as price * gpus * T / K.
            costs = (gpu_hour_price * b.gpus * b.duration_h / k)[:, None]
        else:
            # With step-time jitter an interval costs its own share of the run.
            frac = np.asarray(sim.step_frac)
            share = np.diff(frac, axis=1, append=frac[:, -1:])
            costs = gpu_hour_price * (b.gpus * b.duration_h)[:, None] * share
        # Each decision's gain and cost side by side (one cache line for both): the
        # continue after job j's checkpoint i pays pair j * K + i - 1.  Written through
        # a NumPy view of the array of doubles, with no intermediate table.
        self._pairs = array("d", (0.0,)) * (2 * n * k)
        pairs = np.frombuffer(self._pairs, np.float64).reshape(n, k, 2)
        continue_gains(
            c.true_eval, sim.best_observed, deliver_best=sim.deliver_best, out=pairs[:, :, 0]
        )
        pairs[:, :, 1] = costs

    def continue_value(self, jid: int, ckpt: int) -> float:
        """V_{i+1} - V_i of continuing after checkpoint i = ``ckpt``, tabulated at reset.

        Checkpoints are drawn when the episode is built, so the simulator knows
        them; the agent does not.
        """
        pairs = self._pairs
        at = 2 * (jid * self._k + ckpt - 1)
        gain = pairs[at]
        cost = pairs[at + 1]
        self.quality += gain
        self.gpu_cost -= cost
        return gain - cost


class DelayedUtility(Reward):
    """``reward_timing="delayed"``: each job that left pays its whole V_end - V_1 then.

    The same per-job sum :class:`DenseUtility` pays over the job's decisions,
    paid once the job is finished or stopped, so no reward depends on a
    checkpoint the agent has not yet observed.
    """

    def __init__(self, sim: Simulator, gpu_hour_price: float) -> None:
        """Pay jobs of ``sim`` as they leave, at ``gpu_hour_price`` per GPU-hour."""
        super().__init__(sim)
        self.gpu_hour_price = gpu_hour_price
        # V_i's quality part (sim.utility), column i - 1: a job ends after its
        # checkpoints_done, and column 0 is checkpoint 1's own score.
        self._delivered = _lookup(
            delivered_quality(sim.curves.true_eval, sim.best_observed, sim.deliver_best)
        )
        self._k = sim.n_ckpt
        self._n_ended = 0

    def collect(self) -> float:
        """The utility of the jobs that left since the previous call."""
        sim = self.sim
        gain = cost = 0.0
        delivered, k = self._delivered, self._k
        ended = sim.finished_since(self._n_ended)
        for jid in ended:
            job = sim.job(jid)
            row = jid * k
            gain += delivered[row + sim.checkpoints_done(jid) - 1] - delivered[row]
            first = job.duration * sim.work_fraction(jid, 1)
            cost += self.gpu_hour_price * job.gpus * (job.work_done - first)
        self._n_ended += len(ended)
        self.quality += gain
        self.gpu_cost -= cost
        return gain - cost


class SystemReward(Reward):
    """``reward="system"``: -time_cost x (jobs in system dt) + quality_weight x delivered quality.

    Paid from the first decision on: the return is ``-time_cost * (sum JCT - A_0)
    + quality_weight * sum Q(delivered)``, with A_0 the integral of jobs in system
    before the first decision (no job ends before its first decision).
    """

    def __init__(self, sim: Simulator, time_cost: float, quality_weight: float) -> None:
        """Pay the episode of ``sim`` with these weights."""
        super().__init__(sim)
        self.time_cost = time_cost
        self.quality_weight = quality_weight
        self._true = _lookup(sim.curves.true_eval)
        self._k = sim.n_ckpt
        self._last_jobs_area = 0.0
        self._n_ended = 0

    def begin(self) -> None:
        """Drop what happened before the first decision: that time is not the agent's."""
        self.collect()
        self.time_in_system = self.quality = 0.0

    def collect(self) -> float:
        """The time cost and delivered quality since the previous call."""
        sim = self.sim
        area = sim.jobs_area - self._last_jobs_area
        self._last_jobs_area = sim.jobs_area
        quality = 0.0
        ended = sim.finished_since(self._n_ended)
        for jid in ended:
            quality += self._true[jid * self._k + sim.delivered_checkpoint(jid)]
        self._n_ended += len(ended)
        self.time_in_system -= self.time_cost * area
        self.quality += self.quality_weight * quality
        return -self.time_cost * area + self.quality_weight * quality


def make_reward(config: EvalStopConfig, sim: Simulator) -> Reward:
    """The reward object of ``config``'s mode for the episode of ``sim``."""
    if config.reward == "system":
        return SystemReward(sim, config.time_cost, config.quality_weight)
    if config.reward_timing == "delayed":
        return DelayedUtility(sim, config.gpu_hour_price)
    return DenseUtility(sim, config.gpu_hour_price)
