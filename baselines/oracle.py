"""``Oracle``: the privileged per-job optimum, an upper bound, *not* a policy.

The utility is a sum over jobs of terms V_end - V_1 that depend only on where
each job ends (:func:`evalstop_gym.sim.metrics.stop_values`), so stopping every
job at the checkpoint that maximises its own term, given its true curve and its
observed evals, is exactly optimal.  It reads the simulator's hidden state, so
it runs in the harness (``evalstop_experiments.scoring``), never through the
information boundary, and is kept out of :func:`baselines.scripted_policies`.

Privileged stoppers share one protocol (:class:`PrivilegedStopper`): an object
with ``privileged = True``, a ``name`` and ``bind(sim, price)``, which returns
an actor whose ``act_pending()`` decides the simulator's pending job;
:func:`baselines.evaluate.play_episode` plays any of them.
:class:`OracleStopper` is the Oracle's, :class:`~baselines.curve_oracle.CurveOracle`
the other one.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from evalstop_gym.sim.metrics import stop_values


class PendingActor(Protocol):
    """One episode's privileged stopper, bound to its simulator."""

    def act_pending(self) -> int:
        """The decision on the simulator's pending job: 0 continue, 1 stop."""
        ...


class PrivilegedStopper(Protocol):
    """A stopper that reads the simulator's hidden state: an upper bound, not a policy."""

    name: str
    privileged: bool

    def bind(self, sim: Any, price: float) -> PendingActor:
        """The actor of one episode of ``sim`` at GPU-hour ``price``."""
        ...


def oracle_stop_points(sim: Any, price: float) -> np.ndarray:
    """Per job, the checkpoint (1..K) after which ending maximises its utility term."""
    values = stop_values(
        sim.curves.true_eval,
        sim.curves.obs_eval,
        sim.batch.gpus * sim.batch.duration_h,
        price,
        sim.deliver_best,
        sim.step_frac,
    )
    return np.argmax(values, axis=1) + 1  # the first maximum: the least compute


class Oracle:
    """Privileged stopper: stops each job at its :func:`oracle_stop_points` checkpoint.

    Build it for one episode's simulator (``Oracle(env.unwrapped.sim, price)``)
    and call :meth:`act_pending` at each decision; it has no ``act(obs)``, so
    it cannot be mistaken for a boundary policy.
    """

    name = "Oracle"

    def __init__(self, sim: Any, price: float) -> None:
        """Compute every job's stop point from ``sim``'s hidden curves at ``price``."""
        self.sim = sim
        self.stop_at = oracle_stop_points(sim, price)

    def act_pending(self) -> int:
        """1 if the job awaiting a decision has reached its oracle stop point."""
        jid = self.sim.pending_job_id
        return int(self.sim.checkpoints_done(jid) >= self.stop_at[jid])


class OracleStopper:
    """The :class:`Oracle` as a :class:`PrivilegedStopper`: ``OracleStopper().bind(sim, price)``."""

    name = "Oracle"
    privileged = True

    def bind(self, sim: Any, price: float) -> Oracle:
        """``Oracle(sim, price)``."""
        return Oracle(sim, price)

    def __repr__(self) -> str:
        """``OracleStopper()``."""
        return "OracleStopper()"
