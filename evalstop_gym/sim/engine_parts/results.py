"""The episode's outcome: the per-job record and the metrics read from it.

:class:`EpisodeResults` holds ``record`` (the outcome arrays, hidden fields
included), ``metrics`` (the SPEC's episode metrics) and ``cluster_metrics``
(preemptions, paid costs and deprioritisation).
"""

from __future__ import annotations

import numpy as np

from ..metrics import EpisodeRecord, cluster_metrics, episode_metrics


class EpisodeResults:
    """The episode's record and metrics.

    A mixin of :class:`~evalstop_gym.sim.engine.Simulator`: it reads the
    engine's columns, tables and counters.
    """

    def record(self) -> EpisodeRecord:
        """Per-job outcome arrays (hidden fields included) for metrics."""
        stopped = np.array(self._stopped, dtype=bool)
        ckpt_done = np.array(self._ckpt)
        best = self.best_observed[np.arange(len(ckpt_done)), np.maximum(ckpt_done - 1, 0)]
        return EpisodeRecord(
            num_gpus=self.num_gpus,
            n_ckpt=self.n_ckpt,
            arrival=self.batch.arrival_h,
            finish=np.array(self._finish, dtype=float),
            first_start=np.array(self._first_start, dtype=float),
            job_type=self.batch.job_type,
            gpus=self.batch.gpus,
            duration=self.batch.duration_h,
            hacking=self.batch.hacking,
            peak_progress=self.curves.peak_progress,
            stopped=stopped,
            ckpt_done=ckpt_done,
            delivered=np.where(stopped | self.deliver_best, best, self.n_ckpt - 1),
            true_eval=self.curves.true_eval,
            gpu_hours=np.array(self._gpu_hours, dtype=float),
        )

    def metrics(self) -> dict[str, float]:
        """Episode metrics (SPEC section 6); only meaningful once :attr:`done`."""
        m = episode_metrics(self.record())
        m["n_events"] = float(self.n_events)
        m["n_decisions"] = float(self.n_decisions)
        return m

    def cluster_metrics(self) -> dict[str, float]:
        """Preemptions, paid costs and deprioritisation metrics (:func:`.metrics.cluster_metrics`).

        Apart from :meth:`metrics` (the SPEC's episode metrics, what :meth:`run`
        returns): they read the engine's own counters (preemptions, deprioritised
        jobs, restore GPU-hours), which the per-job record does not hold.
        """
        return cluster_metrics(
            self.record(),
            np.array(self._preemptions),
            self.demoted,
            self.restore_gpu_hours,
            self.eval_cost_h,
        )
