"""The hypotheses of the Bayes stopper: one family per job type, from a calibration.

Every curve family of :mod:`evalstop_gym.sim.synthetic_curves` is *linear* in some of
its parameters given the others: base + A g(p / p*) (``gao``), base + A r_tau(p) -
A D h_onset(p) (``rise-decline``), base + A r_tau(p) (LoRA/DPO).  The nonlinear ones
(p*; tau and onset; tau) are put on a grid of hypotheses weighted by their prior (the
hack fraction splits the RLHF weight between labels); the linear ones get a Gaussian
prior matching the mean and covariance of the uniform draws.  A :class:`Family` holds
each hypothesis's basis at the checkpoints, that Gaussian prior and the weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalstop_gym.sim.calibration import Calibration
from evalstop_gym.sim.synthetic_curves import (
    gao_shape,
    rate_to_tau,
    rise_decline_shape,
    saturating_shape,
    turning_rate,
)

#: Grid points per nonlinear parameter (peak, tau, onset).
GRID = 10
#: Model error added to the eval noise: the grid is discrete, the truth is not.
MODEL_JITTER = 0.01
#: Hypotheses (by posterior weight) whose futures are simulated at each decision, in the
#: ``gao`` and ``rise-decline`` families of the published regimes.  The grounded family
#: simulates all of its hypotheses (:attr:`Family.top`).
TOP_HYPOTHESES = 32
#: Simulated futures per hypothesis (common random numbers, fixed at construction).
FUTURES = 24


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
class Family:
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


def declining_family(cal: Calibration, p: np.ndarray, hack_fraction: float) -> Family:
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
    return Family(phi, m0, s0, log_w, hacking, top=len(log_w), probe=True)


def rlhf_family(cal: Calibration, p: np.ndarray, hack_fraction: float) -> Family:
    """The RLHF family of ``cal`` at progress points ``p``: hacking and healthy hypotheses."""
    if cal.rlhf_shape == "rise-decline" and (
        cal.hack_tau is not None
        or cal.healthy_drop != (0.0, 0.0)
        or cal.log_uniform
        or cal.rlhf_rate is not None
    ):
        return declining_family(cal, p, hack_fraction)
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
    return Family(phi, m0, s0, log_w, hacking)


def sft_family(cal: Calibration, p: np.ndarray) -> Family:
    """The LoRA/DPO family of ``cal`` at progress points ``p``: saturating rises, no hacking."""
    taus = _midpoints(cal.sft_tau, GRID)
    sat = saturating_shape(p[None, :], taus[:, None])
    phi = np.stack([np.ones_like(sat), sat], axis=-1)
    b_mean, b_var = _uniform_moments(cal.sft_base)
    a_mean, a_var = _uniform_moments(cal.sft_amplitude)
    return Family(
        phi,
        np.array([b_mean, a_mean]),
        np.diag([b_var, a_var]),
        np.full(len(taus), -np.log(len(taus))),
        np.zeros(len(taus), dtype=bool),
    )
