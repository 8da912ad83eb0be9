"""``BayesStopper``: the benchmark's ceiling among stoppers that respect the boundary.

It knows what a task's documentation says (the calibration's curve family and
its parameter ranges, the eval noise, the GPU-hour price, the workload's mix)
and nothing else: it never reads the env object.  At each checkpoint it rebuilds
the posterior over the job's curve from the job's observed evals (so it needs
the whole history, ``eval_window = K``) and stops when the expected utility of
stopping is at least that of the best future stop point.

The posterior (:mod:`~baselines.bayes.families`, :mod:`~baselines.bayes.posterior`):
a grid of hypotheses over each curve family's nonlinear parameters, the linear ones
integrated out in closed form, which gives each hypothesis its evidence and its
posterior mean curve.  Tabled at construction for runs of at most
:data:`~baselines.bayes.posterior.TABLED_CHECKPOINTS` checkpoints, from sufficient
statistics beyond, so a run of any length (up to ``MAX_RUN_EVALS``) is served in
memory linear in its length.

The decision.  Under each hypothesis h with posterior mean curve mu_h, stopping
after checkpoint i delivers about mu_h[b] (b = the best observed checkpoint), and
stopping after a later checkpoint m about max(mu_h[b], max_{i<j<=m} mu_h[j])
(``deliver="best"``; mu_h[K] if the task delivers the final checkpoint), minus
the price of the m - i checkpoints in between at the job type's expected
GPU-hours.  It continues iff some m > i has a higher posterior expectation
than stopping now: a multi-step, open-loop look-ahead, which includes the
one-step one.  The delivered checkpoint is the best *observed* one, so the
future evals that choose it are simulated with the task's noise (common
draws around each hypothesis's mean curve, :meth:`BayesStopper._delivered`);
the look-ahead stays open-loop (it does not re-decide after those evals), except
that in the grounded family it also weighs "run j more checkpoints, then go on only
if their evals clear a threshold" (:meth:`BayesStopper._probe_value`).  Beyond
a run of :data:`EXACT_LOOKAHEAD` checkpoints, the far future is weighed in blocks
(:meth:`BayesStopper._future_ends`), so the look-ahead costs the same at any length.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from evalstop_gym.envs.config import EvalStopConfig
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.boundary import JobView
from evalstop_gym.sim.calibration import Calibration, get_calibration
from evalstop_gym.sim.workloads import JOB_TYPES, RLHF, Workload, get_workload

from ..policies import Obs, need_field, observed
from .families import FUTURES, MODEL_JITTER, rlhf_family, sft_family
from .posterior import (
    TABLED_CHECKPOINTS,
    Moments,
    prefixes,
    tabled_means,
    tabled_weights,
)
from .shortcut import SHORTCUT_STEPS, Shortcut

#: The grounded family's look-ahead also weighs "run j more checkpoints, then go on only if
#: the mean of the last :data:`WINDOW` of them clears a threshold": j in these steps ahead,
#: the threshold at these quantiles of that mean over the simulated futures.
PROBE_STEPS = (2, 3, 4, 6, 8, 10, 12)
PROBE_QUANTILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
WINDOW = 5
#: On real curves, the eval noise the model assumes at least (the suite's level): the
#: measured eval has noise of its own, which the env's ``eval_noise`` does not state.
REAL_CURVE_NOISE = 0.05
#: A run of at most this many checkpoints: the look-ahead weighs every future checkpoint
#: (the decisions of the stopper before longer runs were served).
EXACT_LOOKAHEAD = 150
#: A longer run: future points the look-ahead weighs at most, the next
#: :data:`NEAR_CHECKPOINTS` one by one and the rest in blocks
#: (:meth:`BayesStopper._future_ends`).  On prefixes of 400- and 2,000-eval runs of the
#: paper, realistic, hard and grounded families (6 jobs each, about 45 prefixes a job) it
#: takes the decision of the look-ahead over every checkpoint in 99.6-100 % of them
#: (``tests/policies/test_bayes_long_runs.py`` holds it at K = 400).
LOOKAHEAD_POINTS = 48
#: Future checkpoints always weighed one by one: more than the longest probe.
NEAR_CHECKPOINTS = 16


def assumed_eval_noise(sim: Any, real_curve_noise: float = REAL_CURVE_NOISE) -> float:
    """The eval noise a model of the env of ``sim`` (a ``SimConfig``) assumes: what it is told.

    The noise in effect (:meth:`~evalstop_gym.sim.config.SimConfig.resolved_eval_noise`);
    on real runs (``curves``) at least ``real_curve_noise``, since a measured eval carries
    noise of its own that the config's extra ``eval_noise`` does not state, and on one side
    of a corpus's split (a held-out task) at least the median measured eval sd of its
    train runs (a test run's own is never read).  Bayes, the backward-induction stoppers
    and conditioned PPO are all told this figure.
    """
    noise = sim.resolved_eval_noise()
    if sim.curves is not None:
        noise = max(noise, real_curve_noise)
        if sim.curve_split != "all":
            from evalstop_gym.sim.real_curves import corpus_eval_noise

            noise = max(noise, corpus_eval_noise(sim.curves, "train"))
    return noise


class BayesStopper(Shortcut):
    """A posterior over each job's curve, stopping when continuing is not worth its price.

    Args:
        calibration: The task's calibration (name or object): its curve family and ranges.
        eval_noise: Standard deviation of the eval noise (None: the calibration's default).
        gpu_hour_price: Price of a GPU-hour in eval units (the task's).
        workload: Workload preset (or object): hack fraction and GPU-hours per job type.
        deliver: ``"best"`` (the suite's setting) or ``"final"``: what a completed job delivers.
        hack_fraction: Overrides the workload's fraction of hacking RLHF runs.
    """

    def __init__(
        self,
        calibration: str | Calibration = "hard",
        eval_noise: float | None = None,
        gpu_hour_price: float = 5e-4,
        workload: str | Workload = "heavy-rlhf",
        deliver: str = "best",
        hack_fraction: float | None = None,
    ) -> None:
        """Precompute every hypothesis's prior and every prefix's posterior maps."""
        cal = get_calibration(calibration)
        wl = get_workload(workload)
        if deliver not in ("best", "final"):
            raise ConfigError("deliver", deliver, "'best' or 'final'")
        if not isinstance(gpu_hour_price, int | float) or not gpu_hour_price >= 0:
            raise ConfigError("gpu_hour_price", gpu_hour_price, "a number >= 0")
        sigma = cal.eval_noise if eval_noise is None else float(eval_noise)
        hf = wl.hack_fraction if hack_fraction is None else float(hack_fraction)
        self.k = cal.evals_per_job
        self.sigma = sigma
        self._noise = sigma * np.random.default_rng(0).standard_normal((self.k, FUTURES))
        self._noise_size = float(np.abs(self._noise).max())
        #: The first future eval's draws in ascending order, for the shortcut's first step.
        self._first_draws = np.sort(self._noise[0])
        #: The share of those draws above the c-th lowest, c = 0 .. FUTURES.
        self._beat_share = (FUTURES - np.arange(FUTURES + 1)) / FUTURES
        self._draws: dict[int, np.ndarray] = {}
        self._tiles: dict[int, np.ndarray] = {}
        self.deliver_best = deliver == "best"
        # The shortcut is a prefix of this class's look-ahead; a subclass that replaces the
        # look-ahead (the tests' frozen reference) decides through its own, every time.
        cls = type(self)
        tabled = self.k <= TABLED_CHECKPOINTS
        self._shortcut = all(
            getattr(cls, m) is getattr(BayesStopper, m)
            for m in ("_delivered", "_delivered_paths", "_expected_delivered")
        )
        self.name = "Bayes"
        p = np.arange(1, self.k + 1) / self.k
        var = sigma**2 + MODEL_JITTER**2
        fams = {RLHF: rlhf_family(cal, p, hf)}
        sft = sft_family(cal, p)
        fams.update({t: sft for t in range(len(JOB_TYPES)) if t != RLHF})
        self._families = fams
        # A run of at most TABLED_CHECKPOINTS: every prefix's posterior maps, built now;
        # a longer one: its posterior from sufficient statistics at each decision.
        # Built once per family: the job types other than RLHF share one.
        built: dict[int, Any] = {}
        for f in fams.values():
            if id(f) not in built:
                built[id(f)] = prefixes(f, var) if tabled else Moments(f, var)
        self._prefix = {t: built[id(f)] for t, f in fams.items()} if tabled else {}
        self._moments = {} if tabled else {t: built[id(f)] for t, f in fams.items()}
        self._step_cost = {
            t: gpu_hour_price * prof.mean_gpu_hours() / self.k for t, prof in enumerate(wl.profiles)
        }
        self._ramp = {t: c * np.arange(self.k + 1, dtype=float) for t, c in self._step_cost.items()}
        self._ramp_end = float(max(r[-1] for r in self._ramp.values()))
        self.config = {
            "calibration": cal.name,
            "eval_noise": sigma,
            "gpu_hour_price": float(gpu_hour_price),
            "workload": wl.name,
            "deliver": deliver,
            "hack_fraction": hf,
        }

    @classmethod
    def for_task(cls, name: str, price_factor: float = 1.0) -> BayesStopper:
        """The stopper of a named suite task (``evalstop_gym.suite_task``), at a price multiple."""
        from evalstop_gym.suite import suite_config

        return cls.from_config(suite_config(name), price_factor)

    @classmethod
    def from_env_kwargs(
        cls,
        kw: Mapping[str, Any],
        price_factor: float = 1.0,
        *,
        real_curve_noise: float = REAL_CURVE_NOISE,
    ) -> BayesStopper:
        """The stopper of an environment built with ``kw`` (its documented settings only).

        Every setting the env leaves at its default is read from
        :class:`~evalstop_gym.envs.config.EvalStopConfig`, so the stopper models
        the task the env runs.
        """
        config = EvalStopConfig.from_kwargs(**kw)
        return cls.from_config(config, price_factor, real_curve_noise=real_curve_noise)

    @classmethod
    def from_config(
        cls,
        config: EvalStopConfig,
        price_factor: float = 1.0,
        *,
        real_curve_noise: float = REAL_CURVE_NOISE,
    ) -> BayesStopper:
        """The stopper of an environment built from ``config``, at a price multiple.

        Args:
            config: The env's config (``env.env_config``).
            price_factor: Multiple of the config's ``gpu_hour_price``.
            real_curve_noise: With ``curves`` (real runs), the eval noise the model
                assumes at least (:func:`assumed_eval_noise`).
        """
        sim = config.sim_config
        noise = assumed_eval_noise(sim, real_curve_noise)
        return cls(
            calibration=sim.calibration,
            eval_noise=noise,
            gpu_hour_price=config.gpu_hour_price * price_factor,
            workload=sim.workload,
            deliver=sim.deliver,
            hack_fraction=sim.hack_fraction,
        )

    def reset(self) -> None:
        """Nothing to reset: every decision is rebuilt from the observation."""

    def posterior(self, job_type: int, evals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior weights (H,) and mean curves (H, K) of a job after ``evals``."""
        y = np.asarray(evals, dtype=float)
        moments = self._moments.get(job_type)
        if moments is not None:
            w, v = moments.coefficients(y)
            return w, moments.means(v)
        pre = self._prefix[job_type][len(y)]
        assert pre is not None
        return self._weights(pre, y), self._means(pre, y)

    #: The tabled posterior (:mod:`~baselines.bayes.posterior`), as the look-ahead calls it.
    _weights = staticmethod(tabled_weights)
    _means = staticmethod(tabled_means)

    def prob_hacking(self, job_type: int, evals: np.ndarray) -> float:
        """Posterior probability that the job is a hacking run (0 for LoRA/DPO)."""
        w, _ = self.posterior(job_type, evals)
        return float(w[self._families[job_type].hacking].sum())

    def lookahead_posterior(
        self, job_type: int, evals: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The hypotheses the look-ahead simulates: weights (h,) renormalised, mean curves (h, K).

        The heaviest ``top`` of the family's (:attr:`Family.top`), or all of them.
        """
        w, mean = self.posterior(job_type, evals)
        top = self._top(job_type, w)
        if top is None:
            return w, mean
        w_top = w[top]
        return w_top / w_top.sum(), mean[top]

    def _top(self, job_type: int, w: np.ndarray) -> np.ndarray | None:
        """Indices of the hypotheses the look-ahead simulates (None: all of them)."""
        top_n = self._families[job_type].top
        if top_n >= len(w):
            return None
        # The few hypotheses that carry the posterior decide; the rest cannot move it.
        return w.argsort()[-top_n:]

    def decide(self, job_type: int, evals: np.ndarray) -> bool:
        """Whether to stop a job of ``job_type`` whose observed evals so far are ``evals``."""
        evals = np.asarray(evals, dtype=float)
        n = len(evals)
        if n >= self.k:
            return False
        moments = self._moments.get(job_type)
        if moments is not None:
            w, v = moments.coefficients(evals)
        else:
            pre = self._prefix[job_type][n]
            assert pre is not None
            # The weights and the heaviest hypotheses exactly as lookahead_posterior finds them.
            w = self._weights(pre, evals)
        top = self._top(job_type, w)
        if top is not None:
            w = w.take(top)
            w /= np.add.reduce(w, out=np.empty(()))  # a 0-d operand, as in _weights
        b = int(evals.argmax())
        y_best = float(evals[b])
        noise = None
        if moments is not None:
            # The means at checkpoint b and at the look-ahead's future points only, laid out
            # as a run whose one observed checkpoint is b (so n = 1, b = 0 below).
            mean, noise, ramp = self._future_points(job_type, moments, v, top, b, n)
            first = self.deliver_best or n + 1 < self.k  # not a completed job's last eval
            if self._shortcut and first and self._next_point_pays(mean, w, y_best, ramp[1]):
                return False
            n, b = 1, 0
        else:
            if self._shortcut and self._goes_on(job_type, pre, evals, w, top, b):
                return False
            mean = self._means(pre, evals)
            if top is not None:
                mean = mean.take(top, axis=0)
            ramp = self._ramp[job_type][: self.k - n + 1]
        probe = self._families[job_type].probe
        # Without noise the delivered score is the running max of the mean curve, an
        # upper bound of its noisy value: if even that does not pay, stop at once.  A
        # probing policy may end at a different checkpoint under each hypothesis, so its
        # bound takes each hypothesis's best end.
        bound = np.maximum(np.maximum.accumulate(mean[:, n:], axis=1), mean[:, b : b + 1])
        if self.deliver_best:
            gain = w @ (bound - ramp[1:]).max(axis=1) if probe else (w @ bound - ramp[1:]).max()
            if gain <= w @ mean[:, b]:
                return True
        if noise is not None:
            q, y = self._delivered_paths(mean, b, y_best, n, noise)
            expected = w @ self._expected_delivered(q, mean, b) - ramp
            if not probe or expected[1:].max() > expected[0]:
                return bool(expected[1:].max() <= expected[0])
        elif not probe:
            value = self._delivered(mean, b, y_best, n)  # (h, K - n + 1)
            expected = w @ value - ramp
            return bool(expected[1:].max() <= expected[0])
        else:
            q, y = self._delivered_paths(mean, b, y_best, n)
            expected = w @ self._expected_delivered(q, mean, b) - ramp
            if expected[1:].max() > expected[0]:
                return False
        return bool(self._probe_value(w, q, y, ramp, beat=expected[0]) <= expected[0])

    def _future_points(
        self,
        job_type: int,
        moments: Moments,
        v: np.ndarray,
        top: np.ndarray | None,
        b: int,
        n: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A run served from moments, after its first ``n`` evals: the look-ahead's future.

        Returns the posterior means (h, 1 + f) at checkpoint ``b`` and at each of the f
        future points (:meth:`_future_ends`: a checkpoint, or a block's mean), each
        point's draws (f, FUTURES) (a block's: the best of its checkpoints' draws), and
        the price of going on to the end of each point (1 + f,).
        """
        f = self.k - n
        ends = self._future_ends(n)
        blocks = ends is not None
        if ends is None:
            ends = np.arange(1, f + 1)
        starts = np.concatenate(([0], ends[:-1]))
        one = ends - starts == 1  # the points that are one checkpoint
        mean = np.empty((v.shape[0] if top is None else len(top), 1 + len(ends)))
        at = np.concatenate(([True], one))
        mean[:, at] = moments.at(v, top, np.concatenate(([b], n + starts[one])))
        if blocks:
            lo, hi = n + starts[~one], n + ends[~one]
            mean[:, 1:][:, ~one] = moments.block_means(v, top, lo, hi)
            noise = np.maximum.reduceat(self._noise[:f], starts, axis=0)
        else:
            noise = self._noise[:f]
        return mean, noise, self._ramp[job_type].take(np.concatenate(([0], ends)))

    def _probe_value(
        self,
        w: np.ndarray,
        q: np.ndarray,
        y: np.ndarray,
        ramp: np.ndarray,
        beat: float = np.inf,
    ) -> float:
        """The best expected utility of a probing policy on the simulated futures.

        A probing policy runs j more checkpoints, then goes on (to its best end m > j)
        only if the mean of the last :data:`WINDOW` future evals clears a threshold, and
        else ends after checkpoint n + j.  It decides on evals only, so it is a policy the
        stopper could follow: the best of them is a lower bound of the value of
        continuing and deciding again, which the fixed ends of the open-loop look-ahead
        miss when the next evals tell a run that gains late from one that does not
        (the value of information).  ``q`` (f, h, FUTURES): true score delivered after
        each future eval on each simulated future; ``y`` (f, FUTURES, h): its evals.
        Returns as soon as a probing policy's value exceeds ``beat`` (that value: the
        decision only asks whether the best one does).
        """
        f, h, s = q.shape
        val = (q - ramp[1:, None, None]).reshape(f, h * s)  # ending after future eval j
        path_w = np.repeat(w / s, s)  # the futures of hypothesis i are rows i*s .. i*s+s-1
        future = y.transpose(0, 2, 1).reshape(f, h * s)
        best = -np.inf
        for j in PROBE_STEPS:
            if j >= f:
                break
            stat = future[max(0, j - WINDOW) : j].mean(axis=0)
            order = np.argsort(stat, kind="stable")
            at = np.searchsorted(np.cumsum(path_w[order]), PROBE_QUANTILES).clip(0, len(stat) - 1)
            go = stat[None, :] > stat[order][at][:, None]  # (thresholds, paths)
            go_w = go * path_w
            value = (go_w @ val[j:].T).max(axis=1) + (path_w - go_w) @ val[j - 1]
            best = max(best, float(value.max()))
            if best > beat:
                break
        return best

    def _delivered(self, mean: np.ndarray, b: int, y_best: float, n: int) -> np.ndarray:
        """(h, K - n + 1): expected true score delivered if the job ends after n, n + 1, .., K.

        The delivered checkpoint is the best *observed* one, so future evals are
        simulated (common standard-normal draws, the task's sigma) around each
        hypothesis's mean curve; the true score of a checkpoint is its mean.
        """
        q, _ = self._delivered_paths(mean, b, y_best, n)
        return self._expected_delivered(q, mean, b)

    def _expected_delivered(self, q: np.ndarray, mean: np.ndarray, b: int) -> np.ndarray:
        """(h, f + 1): the simulated futures' delivered score ``q`` averaged over the draws,
        after the score of stopping now (checkpoint b's mean).
        """
        out = np.empty((mean.shape[0], q.shape[0] + 1))
        out[:, 0] = mean[:, b]
        out[:, 1:] = q.sum(axis=2).T
        out[:, 1:] /= FUTURES
        if not self.deliver_best:
            out[:, -1] = mean[:, -1]  # a completed job delivers its final checkpoint
        return out

    def _delivered_paths(
        self, mean: np.ndarray, b: int, y_best: float, n: int, noise: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The simulated futures: true score delivered after each future eval (f, h, FUTURES)
        (the final checkpoint's at the end unless ``deliver_best``), and the evals (f, FUTURES, h).

        ``noise`` (f, FUTURES): the draws of the f future points that ``mean``'s columns
        after ``n`` hold (:meth:`_future_points`: a run served from moments), else None:
        every future checkpoint, with the tabled run's draws.
        """
        h = mean.shape[0]
        if noise is None:  # a tabled run: its draws laid out once per size
            f = self.k - n
            noise = self._future_draws(h)[:f]
        else:  # the same layout as a view, for this decision's future points
            f = noise.shape[0]
            noise = noise[:, :, None]
        mu = mean[:, n:].T  # (f, h)
        # Laid out (future eval j, draw s, hypothesis): every step below is one call over
        # contiguous blocks; the floats are those of a loop over j on (h, FUTURES) blocks.
        y = np.add(mu[:, None, :], noise)
        best = np.empty((f, FUTURES, h))  # the best observed eval before future eval j
        best[0] = y_best
        for j in range(1, f):
            np.maximum(best[j - 1], y[j - 1], out=best[j])
        # The delivered score after future eval j: that of the last eval that beat every
        # earlier one strictly (ties keep the earlier), so future eval j's mean where it
        # beats them and else the score delivered after eval j - 1 (checkpoint b's before
        # the first).  Laid out (j, hypothesis, s), so that the sum over the draws runs over
        # rows of FUTURES, in the order (and with the rounding) of ``q.sum(axis=1)`` on a
        # (hypotheses, FUTURES) block.  Values are copied, never computed: the bits of the
        # gather by "the latest index that beat" this replaces (6x the time).
        better = np.greater(y.transpose(0, 2, 1), best.transpose(0, 2, 1))
        q = np.empty((f, h, FUTURES))
        q[0] = mean[:, b, None]
        np.copyto(q[0], mu[0][:, None], where=better[0])
        for j in range(1, f):
            np.copyto(q[j], q[j - 1])
            np.copyto(q[j], mu[j][:, None], where=better[j])
        if not self.deliver_best:
            q[-1] = mean[:, -1, None]  # a completed job delivers its final checkpoint
        return q, y

    def _future_ends(self, n: int) -> np.ndarray | None:
        """The future points the look-ahead weighs after checkpoint ``n``: None for every
        future checkpoint (a run of at most :data:`EXACT_LOOKAHEAD`, or at most
        :data:`LOOKAHEAD_POINTS` to go), else the number of checkpoints after ``n`` at
        which each ends: the next :data:`NEAR_CHECKPOINTS` one by one, then blocks of
        near-equal length, then the last checkpoint alone (what a completed job delivers
        when the task delivers the final one): :data:`LOOKAHEAD_POINTS` points in all.
        """
        f = self.k - n
        if self.k <= EXACT_LOOKAHEAD or f <= LOOKAHEAD_POINTS:
            return None
        far = LOOKAHEAD_POINTS - NEAR_CHECKPOINTS - 1  # blocks before the last checkpoint
        blocks = NEAR_CHECKPOINTS + (f - 1 - NEAR_CHECKPOINTS) * np.arange(1, far + 1) // far
        return np.concatenate((np.arange(1, NEAR_CHECKPOINTS + 1), blocks, [f]))

    def _draw_tiles(self, h: int) -> np.ndarray:
        """The shortcut's draws for ``h`` hypotheses, built once per size.

        (:data:`SHORTCUT_STEPS`, h * FUTURES): row j holds future eval j's draws once per
        hypothesis, laid out as :meth:`_goes_on` repeats the means over the draws.
        """
        tiles = self._tiles.get(h)
        if tiles is None:
            tiles = self._tiles[h] = np.tile(self._noise[:SHORTCUT_STEPS], h)
        return tiles

    def _future_draws(self, h: int) -> np.ndarray:
        """The look-ahead's draws for ``h`` hypotheses laid out (K, FUTURES, h), built once per size."""
        draws = self._draws.get(h)
        if draws is None:
            draws = self._draws[h] = np.ascontiguousarray(
                np.broadcast_to(self._noise[:, :, None], (self.k, FUTURES, h))
            )
        return draws

    def act(self, obs: Obs) -> int:
        """0 continue, 1 stop, from the env's observation (needs ``eval_window = K``)."""
        evals = observed(need_field(obs, "evals", self.name))
        progress = float(need_field(obs, "progress", self.name)[0])
        job_type = int(np.argmax(need_field(obs, "job_type", self.name)))
        n_done = round(progress * self.k)
        if len(evals) != n_done:
            raise ConfigError(
                "eval_window",
                len(obs["evals"]) // 2,
                f"the whole history (eval_window = K = {self.k}): {self.name} saw "
                f"{len(evals)} evals at checkpoint {n_done}",
            )
        return int(self.decide(job_type, evals))

    def __call__(self, view: JobView) -> bool:
        """The simulator's stopper interface (``Simulator.run(stopper)``)."""
        return self.decide(view.job_type, np.fromiter(view.evals, float))

    def __repr__(self) -> str:
        """The settings it was built with."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"BayesStopper({args})"
