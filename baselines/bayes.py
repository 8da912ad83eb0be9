"""``BayesStopper``: the benchmark's ceiling among stoppers that respect the boundary.

It knows what a task's documentation says (the calibration's curve family and
its parameter ranges, the eval noise, the GPU-hour price, the workload's mix)
and nothing else: it never reads the env object.  At each checkpoint it rebuilds
the posterior over the job's curve from the job's observed evals (so it needs
the whole history, ``eval_window = K``) and stops when the expected utility of
stopping is at least that of the best future stop point.

The posterior.  Every curve family of :mod:`evalstop_gym.sim.synthetic_curves`
is *linear* in some of its parameters given the others: base + A g(p / p*)
(``gao``), base + A r_tau(p) - A D h_onset(p) (``rise-decline``), base +
A r_tau(p) (LoRA/DPO).  The nonlinear ones (p*; tau and onset; tau) are put on a
grid of hypotheses weighted by their prior (the hack fraction splits the RLHF
weight between labels); the linear ones get a Gaussian prior matching the mean
and covariance of the uniform draws and are integrated out in closed form
(Bayesian linear regression), which gives each hypothesis its evidence and its
posterior mean curve.  Everything that does not depend on the evals is
precomputed per (job type, number of evals).

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
if their evals clear a threshold" (:meth:`BayesStopper._probe_value`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

try:  # np.einsum without ``optimize`` returns this C function's result: called directly, the
    # posterior skips the Python wrapper (same function, same bits)
    from numpy._core.multiarray import c_einsum as _einsum
except ImportError:  # pragma: no cover - numpy 1.x
    _einsum = np.einsum

from evalstop_gym.envs.config import EvalStopConfig
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.boundary import JobView
from evalstop_gym.sim.calibration import Calibration, get_calibration
from evalstop_gym.sim.synthetic_curves import (
    gao_shape,
    rate_to_tau,
    rise_decline_shape,
    saturating_shape,
    turning_rate,
)
from evalstop_gym.sim.workloads import JOB_TYPES, RLHF, Workload, get_workload

from .policies import Obs, need_field, observed

#: The log-likelihood's factor, as a 0-d array: an operand NumPy takes without converting it.
_MINUS_HALF = np.array(-0.5)
_MINUS_HALF.flags.writeable = False

#: Grid points per nonlinear parameter (peak, tau, onset).
GRID = 10
#: Model error added to the eval noise: the grid is discrete, the truth is not.
MODEL_JITTER = 0.01
#: Hypotheses (by posterior weight) whose futures are simulated at each decision, in the
#: ``gao`` and ``rise-decline`` families of the published regimes.  The grounded family
#: simulates all of its hypotheses (:attr:`_Family.top`).
TOP_HYPOTHESES = 32
#: Simulated futures per hypothesis (common random numbers, fixed at construction).
FUTURES = 24
#: The grounded family's look-ahead also weighs "run j more checkpoints, then go on only if
#: the mean of the last :data:`WINDOW` of them clears a threshold": j in these steps ahead,
#: the threshold at these quantiles of that mean over the simulated futures.
PROBE_STEPS = (2, 3, 4, 6, 8, 10, 12)
PROBE_QUANTILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
WINDOW = 5
#: Future checkpoints the shortcut of :meth:`BayesStopper.decide` looks ahead before the
#: full look-ahead: on one ``hard-0.12`` episode, one more checkpoint already pays in 78 %
#: of the decisions to go on, two or three in 20 % more.
SHORTCUT_STEPS = 3
#: The shortcut's margin, relative to the size of the numbers it adds: orders of magnitude
#: above their rounding (about 1e-16 of that size per operation), so a gain it finds is the
#: sign of the full look-ahead's gain, however BLAS rounds.
SHORTCUT_MARGIN = 1e-9
#: On real curves, the eval noise the model assumes at least (the suite's level): the
#: measured eval has noise of its own, which the env's ``eval_noise`` does not state.
REAL_CURVE_NOISE = 0.05


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


def _uniform_moments(lo_hi: tuple[float, float]) -> tuple[float, float]:
    lo, hi = lo_hi
    return (lo + hi) / 2, (hi - lo) ** 2 / 12


def _log_uniform_moments(lo_hi: tuple[float, float]) -> tuple[float, float]:
    """Mean and variance of exp(U(ln lo, ln hi))."""
    lo, hi = lo_hi
    span = np.log(hi) - np.log(lo)
    mean = (hi - lo) / span
    return float(mean), float((hi * hi - lo * lo) / (2 * span) - mean * mean)


def _draw_moments(cal: Calibration, field: str) -> tuple[float, float]:
    """Mean and variance of a range field as the calibration draws it."""
    r = getattr(cal, field)
    return _log_uniform_moments(r) if field in cal.log_uniform else _uniform_moments(r)


def _draw_midpoints(cal: Calibration, field: str, n: int) -> np.ndarray:
    """``n`` equal-mass midpoints of a range field as the calibration draws it."""
    r = getattr(cal, field)
    if field in cal.log_uniform:
        return np.exp(_midpoints((float(np.log(r[0])), float(np.log(r[1]))), n))
    return _midpoints(r, n)


def _midpoints(lo_hi: tuple[float, float], n: int) -> np.ndarray:
    """``n`` quantile midpoints of a uniform range (equal prior mass each)."""
    lo, hi = lo_hi
    return lo + (hi - lo) * (np.arange(n) + 0.5) / n


@dataclass
class _Family:
    """Hypotheses of one job type: bases, Gaussian prior of the linear part, weights."""

    phi: np.ndarray  # (H, K, d) basis at the K checkpoints
    m0: np.ndarray  # (d,) prior mean of the linear coefficients, or (H, d): one per hypothesis
    s0: np.ndarray  # (d, d) prior covariance, or (H, d, d)
    log_w: np.ndarray  # (H,) log prior weights
    hacking: np.ndarray  # (H,) bool
    #: Hypotheses the look-ahead simulates (the heaviest; all of them if >= H).
    top: int = TOP_HYPOTHESES
    #: Whether the look-ahead also weighs probing policies (:meth:`BayesStopper._probe_value`).
    probe: bool = False


def _declining_family(cal: Calibration, p: np.ndarray, hack_fraction: float) -> _Family:
    """The ``rise-decline`` family with the grounded fields: both labels may decline.

    A hypothesis is (label, tau, onset): tau on the grid of its label's rise constants
    (log-uniform midpoints where the calibration draws them so; with ``rlhf_rate``, 1 / the
    rate's midpoints for both labels, convex rises included, a hacking hypothesis's rate
    raised to :func:`~evalstop_gym.sim.synthetic_curves.turning_rate` at its onset and the
    mean drop, as the draws raise it), the loss term's coefficient A x drop with its
    label's drop moments (a healthy run's ``healthy_drop``).

    The look-ahead simulates every hypothesis, not the heaviest :data:`TOP_HYPOTHESES`: in
    this family a convex rise that gains late and a plateau look alike until the last
    evals, so the posterior stays spread, and the heaviest 32 leave out the late risers
    (the look-ahead then expects every gain to be over and stops healthy runs early).  On
    development seeds of ``grounded-0.05`` (300 jobs per price, per-job utility), the gain
    over NoStop as a fraction of the CurveOracle's is 0.37 / 0.51 / 0.50 at 1/2x, 1x, 2x the
    price with all 200 hypotheses, against -0.12 / 0.20 / 0.33 with the heaviest 32.

    It also weighs probing policies (:meth:`BayesStopper._probe_value`): where an average
    run is about worth its price, a fixed end is not, but a few more evals tell the runs
    that gain late from the others.  On development episodes (seeds 3000-3004) they raise
    the RLHF jobs' gain over NoStop from 1.07 / 2.65 / 5.67 to 1.51 / 3.52 / 7.57 per
    episode at 1/2x, 1x, 2x (``docs/CALIBRATION.md``, "Bayes on the grounded regime").
    """
    b_mean, b_var = _uniform_moments(cal.rlhf_base)
    a_mean, a_var = _uniform_moments(cal.rlhf_amplitude)
    onsets = _midpoints(cal.hack_onset, GRID)
    if cal.rlhf_rate is not None:
        healthy_taus = rate_to_tau(_midpoints(cal.rlhf_rate, GRID))
        hack_taus = healthy_taus
        if cal.hack_rate is not None:
            hack_taus = rate_to_tau(_midpoints(cal.hack_rate, GRID))
    else:
        healthy_taus = _draw_midpoints(cal, "rlhf_tau", GRID)
        hack_taus = healthy_taus if cal.hack_tau is None else _draw_midpoints(cal, "hack_tau", GRID)
    parts, priors = [], []
    for taus, drop in ((hack_taus, _draw_moments(cal, "hack_drop")), (healthy_taus, None)):
        tt, oo = (g.ravel() for g in np.meshgrid(taus, onsets, indexing="ij"))
        if cal.rlhf_rate is not None and drop is not None:
            hack_range = cal.rlhf_rate if cal.hack_rate is None else cal.hack_rate
            turn = turning_rate(oo, np.full(len(oo), drop[0]), *hack_range)
            tt = rate_to_tau(np.maximum(1.0 / tt, turn))
        rise = saturating_shape(p[None, :], tt[:, None])
        loss = rise - rise_decline_shape(
            p[None, :], tt[:, None], oo[:, None], np.ones((len(tt), 1))
        )
        parts.append(np.stack([np.ones_like(rise), rise, -loss], axis=-1))
        d_mean, d_var = drop if drop is not None else _uniform_moments(cal.healthy_drop)
        c_mean = a_mean * d_mean
        c_var = (a_var + a_mean**2) * (d_var + d_mean**2) - c_mean**2
        ac_cov = d_mean * a_var
        priors.append(
            (
                np.array([b_mean, a_mean, c_mean]),
                np.array([[b_var, 0, 0], [0, a_var, ac_cov], [0, ac_cov, c_var]]),
            )
        )
    # Each label's hypotheses carry their own Gaussian prior of the linear part.
    n_hack, n_healthy = len(parts[0]), len(parts[1])
    phi = np.concatenate(parts)
    m0 = np.concatenate(
        [np.repeat(m[None], n, axis=0) for (m, _), n in zip(priors, (n_hack, n_healthy))]
    )
    s0 = np.concatenate(
        [np.repeat(c[None], n, axis=0) for (_, c), n in zip(priors, (n_hack, n_healthy))]
    )
    log_w = np.concatenate(
        [
            np.full(n_hack, np.log(max(hack_fraction, 1e-12) / n_hack)),
            np.full(n_healthy, np.log(max(1 - hack_fraction, 1e-12) / n_healthy)),
        ]
    )
    hacking = np.arange(n_hack + n_healthy) < n_hack
    return _Family(phi, m0, s0, log_w, hacking, top=len(log_w), probe=True)


def _rlhf_family(cal: Calibration, p: np.ndarray, hack_fraction: float) -> _Family:
    if cal.rlhf_shape == "rise-decline" and (
        cal.hack_tau is not None
        or cal.healthy_drop != (0.0, 0.0)
        or cal.log_uniform
        or cal.rlhf_rate is not None
    ):
        return _declining_family(cal, p, hack_fraction)
    b_mean, b_var = _uniform_moments(cal.rlhf_base)
    a_mean, a_var = _uniform_moments(cal.rlhf_amplitude)
    if cal.rlhf_shape == "gao":
        hack = _midpoints(cal.hack_peak, GRID)
        healthy = _midpoints(cal.healthy_peak, GRID)
        peaks = np.concatenate([hack, healthy])
        phi = np.stack(
            [np.ones((len(peaks), len(p))), gao_shape(p[None, :] / peaks[:, None])], axis=-1
        )
        m0, s0 = np.array([b_mean, a_mean]), np.diag([b_var, a_var])
        n_hack, n_healthy = len(hack), len(healthy)
    else:
        taus = _midpoints(cal.rlhf_tau, GRID)
        onsets = _midpoints(cal.hack_onset, GRID)
        tt, oo = np.meshgrid(taus, onsets, indexing="ij")
        tt, oo = tt.ravel(), oo.ravel()
        # The loss term's coefficient is A * drop; its basis is the unit-drop loss.
        rise = saturating_shape(p[None, :], tt[:, None])
        loss = rise - rise_decline_shape(
            p[None, :], tt[:, None], oo[:, None], np.ones((len(tt), 1))
        )
        rise_h = saturating_shape(p[None, :], taus[:, None])
        phi_hack = np.stack([np.ones_like(rise), rise, -loss], axis=-1)
        phi_healthy = np.stack([np.ones_like(rise_h), rise_h, np.zeros_like(rise_h)], axis=-1)
        phi = np.concatenate([phi_hack, phi_healthy])
        d_mean, d_var = _uniform_moments(cal.hack_drop)
        c_mean = a_mean * d_mean
        c_var = (a_var + a_mean**2) * (d_var + d_mean**2) - c_mean**2
        ac_cov = d_mean * a_var
        m0 = np.array([b_mean, a_mean, c_mean])
        s0 = np.array([[b_var, 0, 0], [0, a_var, ac_cov], [0, ac_cov, c_var]])
        n_hack, n_healthy = len(tt), len(taus)
    log_w = np.concatenate(
        [
            np.full(n_hack, np.log(max(hack_fraction, 1e-12) / n_hack)),
            np.full(n_healthy, np.log(max(1 - hack_fraction, 1e-12) / n_healthy)),
        ]
    )
    hacking = np.arange(n_hack + n_healthy) < n_hack
    return _Family(phi, m0, s0, log_w, hacking)


def _sft_family(cal: Calibration, p: np.ndarray) -> _Family:
    taus = _midpoints(cal.sft_tau, GRID)
    sat = saturating_shape(p[None, :], taus[:, None])
    phi = np.stack([np.ones_like(sat), sat], axis=-1)
    b_mean, b_var = _uniform_moments(cal.sft_base)
    a_mean, a_var = _uniform_moments(cal.sft_amplitude)
    return _Family(
        phi,
        np.array([b_mean, a_mean]),
        np.diag([b_var, a_var]),
        np.full(len(taus), -np.log(len(taus))),
        np.zeros(len(taus), dtype=bool),
    )


@dataclass
class _Prefix:
    """What the posterior after n evals needs that does not depend on the evals.

    With L L^T = C the prior covariance of the first n evals under hypothesis h
    and r = y - their prior mean, the whitened residual z = L^-1 r gives the
    evidence (|z|^2) and the posterior mean curve (Phi S0 Phi_n^T L^-T z).  Both
    are affine in y, so each is one matrix-vector product over all hypotheses.
    """

    whiten: np.ndarray  # (H * n, n): rows of L_h^-1, stacked
    whiten_offset: np.ndarray  # (H, n): L_h^-1 (prior mean)
    log_norm: np.ndarray  # (H,) log prior weight - 1/2 log det C
    curve: np.ndarray  # (H * K, n): y -> posterior mean curve (linear part)
    curve_offset: np.ndarray  # (H, K): posterior mean curve at y = 0
    #: (K * H, n): ``curve`` checkpoint-major, so a contiguous slice of rows dotted with y
    #: gives the mean at a few checkpoints in one BLAS call (the rows of ``curve @ y`` in
    #: another order, which BLAS may round otherwise)
    by_checkpoint: np.ndarray
    by_checkpoint_offset: np.ndarray  # (K, H): ``curve_offset`` transposed
    size: float  # bounds |posterior mean| / (1 + max |y|): largest row sum of |curve| and offset
    #: By best checkpoint b < n: ((2 H, n), (2, H)): y -> the posterior mean at checkpoint n
    #: and its excess over checkpoint b's (the shortcut's first step; empty at n = K)
    next_step: list[tuple[np.ndarray, np.ndarray]]


def _prefixes(fam: _Family, var: float) -> list[_Prefix | None]:
    h, k, _ = fam.phi.shape
    if fam.m0.ndim == 1:
        base = fam.phi @ fam.m0  # (H, K)
    else:
        base = np.einsum("hkd,hd->hk", fam.phi, fam.m0)
    cross = fam.phi @ fam.s0  # (H, K, d); (H, K, d) @ (H, d, d) pairs hypotheses
    out: list[_Prefix | None] = [None]
    for n in range(1, k + 1):
        phi_n = fam.phi[:, :n, :]
        cov = cross[:, :n, :] @ phi_n.transpose(0, 2, 1) + var * np.eye(n)  # (H, n, n)
        chol = np.linalg.cholesky(cov)
        whiten = np.linalg.inv(chol)
        logdet = 2 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        gain = cross @ phi_n.transpose(0, 2, 1) @ whiten.transpose(0, 2, 1)  # (H, K, n)
        curve = gain @ whiten  # (H, K, n)
        offset = np.einsum("hij,hj->hi", whiten, base[:, :n])
        curve_offset = base - np.einsum("hkn,hn->hk", gain, offset)
        out.append(
            _Prefix(
                whiten.reshape(h * n, n),
                offset,
                fam.log_w - 0.5 * logdet,
                curve.reshape(h * k, n),
                curve_offset,
                np.ascontiguousarray(curve.transpose(1, 0, 2)).reshape(k * h, n),
                np.ascontiguousarray(curve_offset.T),
                float(np.abs(curve).sum(axis=2).max() + np.abs(curve_offset).max()),
                [
                    (
                        np.concatenate([curve[:, n], curve[:, n] - curve[:, b]]),
                        np.stack([curve_offset[:, n], curve_offset[:, n] - curve_offset[:, b]]),
                    )
                    for b in range(n if n < k else 0)
                ],
            )
        )
    return out


#: Most checkpoints a Bayes stopper models: its precomputed posterior tables grow about as
#: K**3 (measured: 64 MB at K = 20, 0.3 GB at 50, 2.1 GB at 100, 7 GB and 23 s at 150), so
#: a replay of a long run's log with ``--policy bayes`` (K = its evaluations) would
#: exhaust the memory instead of deciding.
MAX_CHECKPOINTS = 150


class BayesStopper:
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
        if cal.evals_per_job > MAX_CHECKPOINTS:
            raise ConfigError(
                "evals_per_job",
                cal.evals_per_job,
                f"at most {MAX_CHECKPOINTS} for the Bayes stopper: its tables of every "
                "prefix's posterior grow about as K**3 (2.1 GB at K = 100, 7 GB at 150)",
            )
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
        self._tables: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._tiles: dict[int, np.ndarray] = {}
        self.deliver_best = deliver == "best"
        # The shortcut is a prefix of this class's look-ahead; a subclass that replaces the
        # look-ahead (the tests' frozen reference) decides through its own, every time.
        cls = type(self)
        self._shortcut = all(
            getattr(cls, m) is getattr(BayesStopper, m)
            for m in ("_delivered", "_delivered_paths", "_expected_delivered")
        )
        self.name = "Bayes"
        p = np.arange(1, self.k + 1) / self.k
        var = sigma**2 + MODEL_JITTER**2
        fams = {RLHF: _rlhf_family(cal, p, hf)}
        sft = _sft_family(cal, p)
        fams.update({t: sft for t in range(len(JOB_TYPES)) if t != RLHF})
        self._families = fams
        self._prefix = {t: _prefixes(f, var) for t, f in fams.items()}
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
        pre = self._prefix[job_type][len(evals)]
        assert pre is not None
        y = np.asarray(evals, dtype=float)
        return self._weights(pre, y), self._means(pre, y)

    @staticmethod
    def _weights(pre: _Prefix, y: np.ndarray) -> np.ndarray:
        """Posterior weights (H,) after the evals ``y`` (float array).

        In place where the floats allow it: the bits of ``exp(log_w - log_w.max())``
        normalised, with ``log_w = log_norm - 0.5 |z|^2`` (scaling by -0.5 is exact,
        and a - b is a + (-b)), in fewer allocations and no Python-level wrappers
        (``ndarray.dot`` makes the BLAS call of ``@``, the same gemv on the same operands,
        without the generalised ufunc's dispatch around it).
        """
        z = pre.whiten.dot(y).reshape(pre.whiten_offset.shape)
        np.subtract(z, pre.whiten_offset, out=z)
        w = _einsum("hn,hn->h", z, z)
        w *= _MINUS_HALF
        w += pre.log_norm
        # Reduced into a 0-d array, a maximum or a sum is an operand as it is: no NumPy
        # scalar is made and converted back to an array for the next call.
        reduced = np.empty(())
        w -= np.maximum.reduce(w, out=reduced)
        np.exp(w, out=w)
        w /= np.add.reduce(w, out=reduced)
        return w

    @staticmethod
    def _means(pre: _Prefix, y: np.ndarray) -> np.ndarray:
        """Posterior mean curves (H, K) after the evals ``y`` (float array)."""
        return pre.curve.dot(y).reshape(pre.curve_offset.shape) + pre.curve_offset

    def prob_hacking(self, job_type: int, evals: np.ndarray) -> float:
        """Posterior probability that the job is a hacking run (0 for LoRA/DPO)."""
        w, _ = self.posterior(job_type, evals)
        return float(w[self._families[job_type].hacking].sum())

    def lookahead_posterior(
        self, job_type: int, evals: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The hypotheses the look-ahead simulates: weights (h,) renormalised, mean curves (h, K).

        The heaviest ``top`` of the family's (:attr:`_Family.top`), or all of them.
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
        pre = self._prefix[job_type][n]
        assert pre is not None
        # The weights and the heaviest hypotheses exactly as lookahead_posterior finds them.
        w = self._weights(pre, evals)
        top = self._top(job_type, w)
        if top is not None:
            w = w.take(top)
            w /= np.add.reduce(w, out=np.empty(()))  # a 0-d operand, as in _weights
        b = int(evals.argmax())
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
        if not probe:
            value = self._delivered(mean, b, float(evals[b]), n)  # (h, K - n + 1)
            expected = w @ value - ramp
            return bool(expected[1:].max() <= expected[0])
        q, y = self._delivered_paths(mean, b, float(evals[b]), n)
        expected = w @ self._expected_delivered(q, mean, b) - ramp
        if expected[1:].max() > expected[0]:
            return False
        return bool(self._probe_value(w, q, y, ramp, beat=expected[0]) <= expected[0])

    def _goes_on(
        self,
        job_type: int,
        pre: _Prefix,
        evals: np.ndarray,
        w: np.ndarray,
        top: np.ndarray | None,
        b: int,
    ) -> bool:
        """Whether the look-ahead's first :data:`SHORTCUT_STEPS` checkpoints settle "go on".

        They are the first columns of :meth:`_delivered` (the running best and the
        delivered checkpoint after future eval j depend on the evals before it only), on
        the hypotheses ``top`` of weights ``w``.  The few mean-curve columns they need
        come from one BLAS call that rounds otherwise than :meth:`_means`, and the sums
        run in another order: so a gain counts only beyond :data:`SHORTCUT_MARGIN` of the
        size of the numbers, and a simulated eval within that margin of the best before it
        (where the full look-ahead's comparison could go the other way) leaves the
        decision to the full look-ahead.  NaN fails every test, so it goes there too.
        """
        n = len(evals)
        steps = min(self.k - n, SHORTCUT_STEPS)
        ramp = self._ramp[job_type]
        # A NaN eval is the argmax (numpy's argmax takes the first NaN), so y_best is NaN and
        # so is the margin, whatever Python's min makes of the NaN.
        values = evals.tolist()
        y_best, lowest = values[b], min(values)
        margin = SHORTCUT_MARGIN * (
            1.0 + pre.size * (1.0 + max(y_best, -lowest)) + self._noise_size + self._ramp_end
        )
        if not math.isfinite(margin):  # a NaN or infinite eval: the full look-ahead decides
            return False
        # Whether _next_pays answers for the first step (not for a completed job's last).
        # Its "no" is not re-asked below; nor is a "go on" it missed by its margin, which
        # only leaves the decision to the full look-ahead.
        first = self.deliver_best or n + 1 < self.k
        if first:
            price = self._step_cost[job_type]  # ramp[1], as a Python float
            pays = self._next_pays(pre, evals, w, top, b, y_best, margin, price)
            if pays is None:  # a first draw near its threshold: the full look-ahead decides
                return False
            if pays or steps == 1:
                return pays
        h = pre.by_checkpoint_offset.shape[1]
        # Checkpoints b .. n + steps - 1 (those between b and n too: one call, not two).
        cols = pre.by_checkpoint[b * h : (n + steps) * h].dot(evals).reshape(-1, h)
        cols += pre.by_checkpoint_offset[b : n + steps]
        if top is not None:
            cols = cols.take(top, axis=1)
        stop_now = w.dot(cols[0])
        # Checkpoint b's means moved next to the future ones (over checkpoint n - 1's, not
        # needed here), then each mean repeated over its hypothesis's draws: the steps below
        # are calls on contiguous rows of h * FUTURES, without numpy's broadcasting machinery.
        cols[n - b - 1] = cols[0]
        tiles = cols[n - b - 1 :].repeat(FUTURES, axis=1)  # (1 + steps, h * FUTURES)
        y = tiles[1:] + self._draw_tiles(len(w))[:steps]  # future eval j on each simulated future
        w_draws = w.repeat(FUTURES)  # the weight of each simulated future
        best: Any = y_best
        q = tiles[0]  # the delivered score while no future eval beats y_best: checkpoint b's
        for j in range(steps):
            # The first step after _next_pays: its draws are clear and its gain was counted.
            counted = first and j == 0
            if not counted:
                gap = y[j] - best
                better = gap > 0
                if not np.minimum.reduce(np.abs(gap, out=gap)) > margin:
                    return False
            else:
                better = y[j] > best
            np.putmask(q, better, tiles[j + 1])
            if not counted:
                if not self.deliver_best and n + j + 1 == self.k:
                    value = w.dot(cols[-1])  # a completed job delivers its final checkpoint
                else:
                    value = q.dot(w_draws) / FUTURES
                if value - ramp[j + 1] - stop_now > margin:
                    return True
            if j + 1 < steps:
                best = np.maximum(best, y[j], out=y[j])  # y[j] is not needed after this step
        return False

    def _next_pays(
        self,
        pre: _Prefix,
        evals: np.ndarray,
        w: np.ndarray,
        top: np.ndarray | None,
        b: int,
        y_best: float,
        margin: float,
        price: float,
    ) -> bool | None:
        """Whether one more checkpoint already pays: :meth:`_goes_on`'s first step, counted.

        The same test on the same simulated futures, written per hypothesis i: future eval 0
        beats the best so far on the draws above ``t_i = y_best - mean_i[n]``, so with
        ``c_i`` of them the gain over stopping now is ``sum_i w_i c_i (mean_i[n] -
        mean_i[b]) / FUTURES``: a count over the sorted draws and a few calls on vectors
        instead of (hypotheses, draws) blocks.  As in :meth:`_goes_on`, a draw within
        ``margin`` of its threshold (where rounding could turn the comparison) returns None,
        which leaves the decision to the full look-ahead; a gain within ``margin`` of the
        price returns False, and :meth:`_goes_on` looks further, its first step's draws
        known clear of their thresholds; a NaN or infinite mean makes the gain NaN or
        infinite, which never counts.
        """
        rows, offset = pre.next_step[b]
        means = rows.dot(evals).reshape(offset.shape)
        means += offset
        if top is not None:
            means = means.take(top, axis=1)
        # Draws below t_i - margin, and below t_i + margin: equal counts iff none is near t_i.
        # (Two calls on the thresholds cost less than one on a (2, h) block built for them.)
        draws, mean_next = self._first_draws, means[0]
        below = draws.searchsorted((y_best - margin) - mean_next)
        near = draws.searchsorted((y_best + margin) - mean_next)
        # below <= near slot by slot, so the counts are equal iff the rows are.
        if below.tobytes() != near.tobytes():
            return None
        # means[1]: mean_i[n] - mean_i[b]; one three-operand sum instead of a product and a dot
        gain = _einsum("h,h,h->", w, means[1], self._beat_share.take(near))
        return bool(price + margin < gain < np.inf)

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
        self, mean: np.ndarray, b: int, y_best: float, n: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The simulated futures: true score delivered after each future eval (f, h, FUTURES)
        (the final checkpoint's at the end unless ``deliver_best``), and the evals (f, FUTURES, h).
        """
        f, h = self.k - n, mean.shape[0]
        noise, pick, column = self._future_tables(h)
        mu = mean[:, n:].T  # (f, h)
        # Laid out (future eval j, draw s, hypothesis): every step below is one call over
        # contiguous blocks; the floats are those of a loop over j on (h, FUTURES) blocks.
        y = np.add(mu[:, None, :], noise[:f])
        best = np.empty((f, FUTURES, h))  # the best observed eval before future eval j
        best[0] = y_best
        for j in range(1, f):
            np.maximum(best[j - 1], y[j - 1], out=best[j])
        # The delivered checkpoint after future eval j: the last one that beat every
        # earlier eval strictly (ties keep the earlier), as a flat index into scores;
        # laid out (j, hypothesis, s), so that the gather below is contiguous and the
        # sum over the draws runs over rows of FUTURES, in the order (and with the
        # rounding) of ``q.sum(axis=1)`` on a (hypotheses, FUTURES) block.
        better = np.greater(y.transpose(0, 2, 1), best.transpose(0, 2, 1))
        at = np.where(better, pick[:f], column)
        for j in range(1, f):
            np.maximum(at[j - 1], at[j], out=at[j])
        scores = np.empty((f + 1, h))
        scores[0] = mean[:, b]
        scores[1:] = mu
        q = scores.ravel().take(at)
        if not self.deliver_best:
            q[-1] = mean[:, -1, None]  # a completed job delivers its final checkpoint
        return q, y

    def _draw_tiles(self, h: int) -> np.ndarray:
        """The shortcut's draws for ``h`` hypotheses, built once per size.

        (:data:`SHORTCUT_STEPS`, h * FUTURES): row j holds future eval j's draws once per
        hypothesis, laid out as :meth:`_goes_on` repeats the means over the draws.
        """
        tiles = self._tiles.get(h)
        if tiles is None:
            tiles = self._tiles[h] = np.tile(self._noise[:SHORTCUT_STEPS], h)
        return tiles

    def _future_tables(self, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The look-ahead's constant arrays for ``h`` hypotheses, built once per size.

        The draws laid out (K, FUTURES, h); each future eval's flat index into the
        (checkpoint, hypothesis) score table, laid out (K, h, FUTURES); and the
        index of checkpoint b's row of each hypothesis, (h, 1).
        """
        tables = self._tables.get(h)
        if tables is None:
            noise = np.ascontiguousarray(
                np.broadcast_to(self._noise[:, :, None], (self.k, FUTURES, h))
            )
            column = np.arange(h)[:, None]
            pick = np.ascontiguousarray(
                np.broadcast_to(
                    (np.arange(1, self.k + 1)[:, None, None] * h + column),
                    (self.k, h, FUTURES),
                )
            )
            tables = self._tables[h] = (noise, pick, column)
        return tables

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
