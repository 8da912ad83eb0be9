"""A run-recognising stopper against ``trl-gao`` and the held-out task ``trl-heldout``.

The stopper memorises the shipped corpus and stops at a recognised run's peak.  Not
a policy of the package: the adversary the held-out task must defeat.  It knows
all the corpus's runs (gold, recorded eval, label), maps each exactly as the env's
task does (the per-run map of ``curve_scale="run"``, or the common map), and after
every eval of an RLHF job picks the library run whose curve is nearest to the
observed prefix (least squares over the recorded evals and the golds; with
``affine=True`` each candidate's curve is first fitted to the prefix by an offset and
a positive factor, which a per-job jitter of the map cannot hide).  It then plays the
recognised run as known: the future evals are the recognised curve, the delivered
checkpoint is the best observed one and its value is the recognised gold there, and it
stops when ending now is worth more than every later end at the task's price (on a
recognised hacking run: at its gold peak).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evalstop_gym.corpus import read_traces
from evalstop_gym.corpus.split import select, split_runs
from evalstop_gym.envs.tables import observed
from evalstop_gym.sim.real_curves import BASE, GAIN, corpus_map, gold_gain
from evalstop_gym.sim.workloads import RLHF, get_workload


def library(
    path: str, k: int, scale: str, side: str = "all", power: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """(curves (2R, K): each run's mapped recorded eval, then its mapped gold; peaks (2R,)).

    ``side``: the runs of that side of the corpus's split ("all": the whole corpus, what
    a memoriser knows; "train": what a fair stopper may know); ``power``: the runs warped
    in time as ``curve_warp`` warps them (checkpoint progress p at the run's p ** power).
    """
    traces = read_traces(path, min_checkpoints=2)
    traces = select(traces, split_runs(traces), side)
    cmap = corpus_map(path)
    evs, golds = [], []
    for t in traces:
        x = t.step / float(t.step[-1])
        q = (np.arange(1, k + 1) / k) ** power
        ev, gold = np.interp(q, x, t.eval), np.interp(q, x, t.gold)
        if scale == "corpus":
            evs.append(cmap.evals(ev))
            golds.append(cmap.evals(gold))
        else:
            f = GAIN / gold_gain(t)
            evs.append(BASE + f * (ev - float(t.gold[0])))
            golds.append(BASE + f * (gold - float(t.gold[0])))
    curves = np.array(evs + golds)
    peaks = np.concatenate([np.argmax(golds, axis=1)] * 2)
    return curves, peaks


class Recogniser:
    """Stop an RLHF job at the gold peak of the library run its observed prefix matches best."""

    name = "Recogniser"

    def __init__(
        self,
        kw: dict[str, Any],
        k: int = 20,
        affine: bool = False,
        sigma: float = 0.0,
        side: str = "all",
        grid: int = 11,
    ) -> None:
        """The library of the task's corpus under the task's map (``kw``: its env kwargs).

        ``sigma`` > 0: weigh every library run by its likelihood under Gaussian eval noise
        of that sd and stop on the posterior's expected values (the library's Bayes
        stopper), instead of trusting the nearest run.  Under a task's ``curve_jitter``
        and ``curve_warp`` it weighs every run at ``grid`` gain factors and time warps
        too, each by the jitter's own prior (it knows how the task perturbs a run).
        """
        self.sigma = sigma
        scale = kw.get("curve_scale", "run")
        jitter = float(kw.get("curve_jitter", 0.0))
        self.stretch: tuple[np.ndarray, np.ndarray] | None = None
        if jitter > 0:  # the jitter's own log-normal gain factor, on a grid, as prior
            z = np.linspace(-2.5, 2.5, grid)
            sd = jitter * corpus_map(kw["curves"]).log_gain_sd
            self.stretch = (np.exp(sd * z), -0.5 * z**2)
        warp = float(kw.get("curve_warp", 0.0))
        self.warped: tuple[np.ndarray, np.ndarray] | None = None
        if warp > 0:  # every run at every warp of the warp's grid, weighted by its prior
            z = np.linspace(-2.5, 2.5, grid)
            sd = warp * corpus_map(kw["curves"]).log_peak_sd
            lib = [library(kw["curves"], k, scale, side, float(g))[0] for g in np.exp(sd * z)]
            golds = np.concatenate([c[len(c) // 2 :] for c in lib])
            self.warped = (golds, np.repeat(-0.5 * z**2, len(lib[0]) // 2))
        self.curves, self.peaks = library(kw["curves"], k, scale, side)
        self.runs = len(self.curves) // 2
        self.affine = affine
        self.k = k
        wl = get_workload(kw.get("workload", "heavy-rlhf"))
        self.step_cost = kw["gpu_hour_price"] * wl.profiles[RLHF].mean_gpu_hours() / k

    def reset(self) -> None:
        """Nothing carries between episodes."""

    def recognise(self, evals: np.ndarray) -> tuple[int, float, float]:
        """(index of the library curve nearest to the prefix ``evals``, its offset, factor)."""
        n = len(evals)
        lib = self.curves[:, :n]
        if self.affine and n >= 3:
            xm = lib.mean(axis=1, keepdims=True)
            ym = evals.mean()
            dx = lib - xm
            b = np.clip((dx @ (evals - ym)) / np.maximum((dx**2).sum(axis=1), 1e-12), 0.2, 5.0)
            fit = ym + b[:, None] * dx
            err = ((fit - evals) ** 2).sum(axis=1)
            m = int(np.argmin(err))
            return m, float(ym - b[m] * xm[m, 0]), float(b[m])
        err = ((lib - evals) ** 2).sum(axis=1)
        return int(np.argmin(err)), 0.0, 1.0

    def act(self, obs: dict[str, np.ndarray]) -> int:
        """1 when ending now is worth at least every later end, the run being the recognised one."""
        if int(np.argmax(obs["job_type"])) != RLHF:
            return 0
        evals = observed(obs["evals"]).astype(float)
        n = len(evals)
        if self.sigma > 0:
            return self._posterior_act(evals)
        m, a, b = self.recognise(evals)
        future = a + b * self.curves[m]
        gold = a + b * self.curves[self.runs + m % self.runs]
        seq = np.concatenate([evals, future[n:]])
        best = np.zeros(self.k, dtype=int)
        for i in range(1, self.k):
            best[i] = i if seq[i] > seq[best[i - 1]] else best[i - 1]
        value = gold[best] - self.step_cost * np.arange(1, self.k + 1)
        return int(value[n - 1] >= value[n - 1 :].max())

    def _values(self, evals: np.ndarray, future: np.ndarray, gold: np.ndarray) -> np.ndarray:
        """(M, K): each candidate's utility of ending after each checkpoint, given the prefix."""
        n = len(evals)
        seq = np.concatenate([np.broadcast_to(evals, (len(future), n)), future[:, n:]], axis=1)
        best = np.zeros(seq.shape, dtype=int)
        top = seq[:, 0].copy()
        for i in range(1, self.k):
            up = seq[:, i] > top
            best[:, i] = np.where(up, i, best[:, i - 1])
            top = np.where(up, seq[:, i], top)
        q = np.take_along_axis(gold, best, axis=1)
        return q - self.step_cost * np.arange(1, self.k + 1)[None, :]

    def _posterior_act(self, evals: np.ndarray) -> int:
        """Stop when ending now is worth at least every later end in posterior expectation."""
        n = len(evals)
        golds = self.curves[self.runs :]
        logprior = np.zeros(len(golds))
        if self.warped is not None:
            golds, logprior = self.warped
        if self.stretch is not None:  # every run at every gain factor of the jitter's grid
            f, lp = self.stretch
            m = len(golds)
            golds = (BASE + f[:, None, None] * (golds[None] - BASE)).reshape(-1, self.k)
            logprior = (lp[:, None] + logprior[None, :]).reshape(-1)
            assert len(logprior) == len(f) * m
        loglik = logprior - ((golds[:, :n] - evals) ** 2).sum(axis=1) / (2 * self.sigma**2)
        w = np.exp(loglik - loglik.max())
        w /= w.sum()
        value = w @ self._values(evals, golds, golds)
        return int(value[n - 1] >= value[n - 1 :].max())


def _score(policy_factory: Any, task: str, seeds: range, n_jobs: int, fair: bool) -> Any:
    from evalstop_experiments import scoring

    kw = scoring.env_kwargs(task, 1.0, n_jobs)
    refs = scoring.references(kw) if fair else [scoring.reference_stopper(kw)]
    stoppers = [
        scoring.Stopper(scoring.NOSTOP, "NoStop", scoring.NoStop()),
        scoring.Stopper(scoring.EXTRA, "Recogniser", policy_factory(kw)),
        *refs,
    ]
    rows = scoring.score_task(task, 1.0, kw, stoppers, list(seeds))
    return {r.stopper_kind: r for r in rows}


def test_the_recogniser_memorises_the_recorded_replay() -> None:
    """On ``trl-gao`` (recorded evals, per-run map) it plays nearly as the Oracle."""
    pytest.importorskip("scipy")
    by = _score(Recogniser, "trl-gao", range(100, 103), 30, fair=False)
    assert by["extra"].score > 0.9


@pytest.mark.slow
def test_the_recogniser_gets_nothing_on_the_heldout_task() -> None:
    """On ``trl-heldout`` (fresh noise, common map) neither recogniser beats Bayes's CI.

    The nearest-run recogniser and the likelihood one (a Bayes stopper whose library is
    the whole corpus, test runs included) both score no better than the upper end of the
    fair Bayes stopper's interval over test runs.
    """
    pytest.importorskip("scipy")
    from evalstop_gym.sim.real_curves import corpus_eval_noise

    def likelihood(kw: dict) -> Recogniser:
        return Recogniser(kw, sigma=corpus_eval_noise(kw["curves"]), grid=7)

    for factory in (Recogniser, likelihood):
        by = _score(factory, "trl-heldout", range(100, 106), 60, fair=True)
        assert by["extra"].score <= by["Bayes"].score_hi, by["extra"].score
