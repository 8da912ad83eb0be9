"""Eval, loss and proxy curves of every job, drawn once per episode.

All of a job's checkpoints are drawn when the episode is built, from streams
that do not depend on the policy or the scheduler, so two policies run on the
same seed see the very same observations until their decisions diverge
(common random numbers), and the eval-noise draws are shared across noise
levels (observed = true + sigma * z with the same z).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ._fastmath import uniform_rows
from .calibration import Calibration
from .workloads import RLHF, JobBatch


def gao_shape(x: np.ndarray) -> np.ndarray:
    """Gao et al.'s RL gold curve normalised by its peak: x (1 - ln x), 0 at x = 0.

    Peak 1 at x = 1, back to 0 at x = e and negative beyond.
    """
    x = np.asarray(x, dtype=float)
    out = np.zeros_like(x)
    pos = x > 0
    out[pos] = _gao_positive(x[pos])
    return out


def _gao_positive(x: np.ndarray) -> np.ndarray:
    """``x * (1 - ln x)`` for ``x > 0``, the operations in that order, into one new array."""
    out = np.log(x)
    np.subtract(1.0, out, out=out)
    out *= x
    return out


def saturating_shape(p: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """1 - exp(-p / tau), normalised to reach 1 at p = 1 (LoRA/DPO runs)."""
    return -np.expm1(-p / tau) / -np.expm1(-1.0 / tau)


def rise_decline_shape(
    p: np.ndarray, tau: np.ndarray, onset: np.ndarray, drop: np.ndarray
) -> np.ndarray:
    """A saturating rise less a late quadratic loss: the ``rise-decline`` RLHF family.

    ``saturating_shape(p, tau) - drop * ((p - onset)+ / (1 - onset))^2``; with
    ``drop = 0`` a healthy run, else a hacking one that starts to lose at ``onset``.
    """
    late = np.maximum(p - onset, 0.0) / (1.0 - onset)
    return saturating_shape(p, tau) - drop * late * late


def rise_decline_peak(tau: np.ndarray, onset: np.ndarray, drop: np.ndarray) -> np.ndarray:
    """Progress of the maximum of :func:`rise_decline_shape` on [0, 1] (1e-3 resolution)."""
    grid = np.linspace(0.0, 1.0, 1001)
    shape = rise_decline_shape(grid[None, :], tau[:, None], onset[:, None], drop[:, None])
    return grid[np.argmax(shape, axis=1)]


#: Rise rates closer to 0 than this are a straight line: tau = 1 / rate would overflow the
#: shape's exponentials, and the rise is already linear to 1e-6.
MIN_RATE = 1e-6


def rate_to_tau(rate: np.ndarray) -> np.ndarray:
    """Rise constants tau = 1 / rate of :func:`saturating_shape` (a negative one: convex)."""
    rate = np.asarray(rate, dtype=np.float64)
    safe = np.where(np.abs(rate) < MIN_RATE, np.where(rate < 0, -MIN_RATE, MIN_RATE), rate)
    return 1.0 / safe


#: Progress from which a hacking run's curve must be falling (:func:`turning_rate`): the
#: corpus's rule wants its peak before the last tenth of the run.
TURN_BY = 0.9


def _rise_slope(rate: np.ndarray, p: float) -> np.ndarray:
    """Slope at progress ``p`` of :func:`saturating_shape` with tau = 1 / rate."""
    r = np.where(np.abs(rate) < MIN_RATE, MIN_RATE, rate)
    return r * np.exp(-r * p) / -np.expm1(-r)


def turning_rate(
    onset: np.ndarray, drop: np.ndarray, lo: float, hi: float, iterations: int = 40
) -> np.ndarray:
    """The least rise rate in [lo, hi] at which a hacking run falls over [:data:`TURN_BY`, 1].

    A convex rise (rate < 0) with a small loss may still climb at the end of the run, a
    hacking run that never turned over; raised to this rate it peaks before
    :data:`TURN_BY`.  The run falls on [TURN_BY, 1] when the rise's slope is at most the
    loss's, 2 drop (p - onset) / (1 - onset)^2, at both ends (the difference of slopes
    is convex there); the rise's slope falls as the rate grows, so bisection finds it.
    """
    onset, drop = np.asarray(onset, dtype=float), np.asarray(drop, dtype=float)

    def falls(rate: np.ndarray) -> np.ndarray:
        ok = np.ones(rate.shape, dtype=bool)
        for p in (TURN_BY, 1.0):
            loss = 2.0 * drop * np.maximum(p - onset, 0.0) / (1.0 - onset) ** 2
            ok &= _rise_slope(rate, p) <= loss
        return ok

    a, b = np.full(onset.shape, float(lo)), np.full(onset.shape, float(hi))
    for _ in range(iterations):
        mid = (a + b) / 2
        good = falls(mid)
        b, a = np.where(good, mid, b), np.where(good, a, mid)
    return np.where(falls(np.full(onset.shape, float(lo))), lo, b)


def _range_draw(cal: Calibration, field: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` draws of a range field: uniform, or log-uniform if ``cal.log_uniform`` lists it."""
    lo, hi = getattr(cal, field)
    if field in cal.log_uniform:
        return np.exp(rng.uniform(np.log(lo), np.log(hi), size=n))
    return rng.uniform(lo, hi, size=n)


def rise_decline_draws(
    cal: Calibration, hacking: np.ndarray, rng: np.random.Generator, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tau, onset, drop) of ``n`` runs of a ``rise-decline`` calibration; ``hacking`` masks hacking RLHF runs.

    The draws are tau, onset, drop (``n`` each, in that order), then, only for a calibration
    that sets them, the hacking runs' tau and the healthy runs' drop, so a calibration
    without those fields draws exactly what it always did.  With ``rlhf_rate`` every run's
    tau is 1 / (its uniform rate draw), for both labels (a hacking run's from ``hack_rate``
    when set, drawn after the drops), a hacking run's rate raised where needed to
    :func:`turning_rate` (so that it peaks inside the run).  Other jobs get drop 0.
    """
    if (
        not cal.log_uniform
        and cal.hack_tau is None
        and cal.healthy_drop == (0.0, 0.0)
        and cal.rlhf_rate is None
    ):
        tau, onset, drop = (
            rng.uniform(r[0], r[1], size=n) for r in (cal.rlhf_tau, cal.hack_onset, cal.hack_drop)
        )
        return tau, onset, np.where(hacking, drop, 0.0)
    rate = None if cal.rlhf_rate is None else rng.uniform(*cal.rlhf_rate, size=n)
    tau = _range_draw(cal, "rlhf_tau", rng, n) if rate is None else None
    onset = _range_draw(cal, "hack_onset", rng, n)
    drop = _range_draw(cal, "hack_drop", rng, n)
    if rate is not None:
        hack_range = cal.rlhf_rate if cal.hack_rate is None else cal.hack_rate
        if cal.hack_rate is not None:
            rate = np.where(hacking, rng.uniform(*cal.hack_rate, size=n), rate)
        # a hacking run turns over inside the run (no draw: the other streams are unchanged)
        turn = turning_rate(onset, drop, *hack_range)
        tau = rate_to_tau(np.where(hacking, np.maximum(rate, turn), rate))
    elif cal.hack_tau is not None:
        tau = np.where(hacking, _range_draw(cal, "hack_tau", rng, n), tau)
    healthy = np.zeros(n)
    if cal.healthy_drop != (0.0, 0.0):
        healthy = _range_draw(cal, "healthy_drop", rng, n)
    return tau, onset, np.where(hacking, drop, healthy)


def rlhf_true_curves(
    cal: Calibration, progress: np.ndarray, hacking: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Noise-free RLHF curves of a ``rise-decline`` calibration on any progress grid.

    The parameters come from the calibration's distributions (base and gain uniform, then
    :func:`rise_decline_draws`), as the simulator's RLHF jobs draw them, though not from
    the simulator's streams: what the regime criterion samples
    (``evalstop-gym curves fit-regime``).  A healthy run with a drop may end below its
    peak (``healthy_drop``).

    Args:
        cal: A ``rise-decline`` calibration.
        progress: (m,) progress points (0 = start of the run).
        hacking: (n,) hacking labels.
        rng: The stream of the draws.

    Returns:
        (n, m) curves.
    """
    hacking = np.asarray(hacking, dtype=bool)
    n = hacking.size
    base = rng.uniform(*cal.rlhf_base, size=n)
    amp = rng.uniform(*cal.rlhf_amplitude, size=n)
    tau, onset, drop = rise_decline_draws(cal, hacking, rng, n)
    p = np.asarray(progress, dtype=float)[None, :]
    shape = rise_decline_shape(p, tau[:, None], onset[:, None], drop[:, None])
    return base[:, None] + amp[:, None] * shape


@dataclass
class Curves:
    """Per-job, per-checkpoint curves; rows are jobs, columns checkpoints 1..K.

    ``true_eval``, ``proxy`` and ``peak_progress`` are hidden state.
    """

    progress: np.ndarray  # (K,) declared progress at each checkpoint
    true_eval: np.ndarray  # (n, K) noise-free eval score
    obs_eval: np.ndarray  # (n, K) observed eval score
    loss: np.ndarray  # (n, K) observed training loss
    proxy: np.ndarray  # (n, K) proxy (reward-model) score
    peak_progress: np.ndarray  # (n,) progress of the true peak; inf if none
    signal_runs: list | None = None  # (n,) the corpus run each job replays (sim/signals.py)


@functools.lru_cache(maxsize=64)
def _checkpoint_grid(k: int) -> tuple[np.ndarray, np.ndarray]:
    """(progress i / K at checkpoints 1..K, the proxy's shape there), read-only, once per K."""
    p = np.arange(1, k + 1) / k
    proxy_shape = saturating_shape(p, np.float64(0.5))
    p.flags.writeable = proxy_shape.flags.writeable = False
    return p, proxy_shape


def sample_curves(
    batch: JobBatch,
    cal: Calibration,
    eval_noise: float,
    rng: np.random.Generator,
    noise_rng: np.random.Generator,
) -> Curves:
    """Draw every job's curves according to ``cal``.

    The float operations are those of :func:`gao_shape`,
    :func:`saturating_shape` and the loss formula, rewritten only where the
    result is provably the same bits (``(-a) / b`` is ``a / (-b)``,
    ``min(p, inf)`` is ``p``), and computed in place: ``tests/sim/test_vectorised_draws.py`` checks them against
    the straightforward code.
    """
    n, k = len(batch), cal.evals_per_job
    p, proxy_shape = _checkpoint_grid(k)
    rlhf = batch.job_type == RLHF
    hacking = batch.hacking

    # Draw every parameter for every job (fixed number of draws per job) so a
    # change of mix or label does not shift the other jobs' streams.  One
    # call, row by row, gives the very draws of one call per parameter
    # (low + (high - low) * u for each, in order); the plateau row is a plain
    # U[0, 1) draw (0 + 1 * u is u).
    ranges = (
        cal.rlhf_base,
        cal.rlhf_amplitude,
        cal.hack_peak,
        cal.healthy_peak,
        cal.sft_base,
        cal.sft_amplitude,
        cal.sft_tau,
        cal.loss_floor,
        cal.loss_tau,
        (0.0, 1.0),
        cal.loss_plateau_at,
        cal.proxy_amplitude,
    )
    draws = uniform_rows(rng, ranges, n)
    # (n, 1) columns, broadcast along the checkpoints
    rl_base, rl_amp, _, _, sft_base, sft_amp, sft_tau, loss_floor, loss_tau, _, _, proxy_amp = (
        draws[:, :, None]
    )
    peak = np.where(hacking, draws[2], np.where(rlhf, draws[3], np.inf))
    # The RLHF family is computed for every job (most are RLHF; elementwise, so the
    # same values as on the RLHF jobs only, without gathering their rows), the other
    # family below on the other jobs only.
    if cal.rlhf_shape == "gao":
        # An RLHF job's peak is > 0 (Calibration checks it), so x > 0 and
        # gao_shape is x (1 - ln x); the others get x = p, never used.
        rl_curve = _gao_rows(p / np.where(rlhf, peak, 1.0)[:, None], rl_base, rl_amp)
    else:
        # Drawn after every other parameter, so the gao calibrations' streams
        # stay exactly what they were.
        tau, onset, drop = rise_decline_draws(cal, hacking & rlhf, rng, n)
        rl_curve = rl_base + rl_amp * rise_decline_shape(
            p[None, :], tau[:, None], onset[:, None], drop[:, None]
        )
        # a hacking run's waste counts from its peak; a healthy run's never does (even when
        # it declines a little: its label says it is not hacking)
        peak = np.where(rlhf & hacking, rise_decline_peak(tau, onset, drop), np.inf)
    # The other jobs' saturating curves, computed on their rows only (elementwise: the
    # same values as on every row), written over their rows of the (new) RLHF array.
    true_eval = rl_curve
    sft = ~rlhf
    true_eval[sft] = _saturating_rows(p, sft_tau[sft], sft_base[sft], sft_amp[sft])

    # Training loss falls for every job, hacking or not: the decoupling the
    # paper rests on.  A plateauing job stops improving at `plateau_at`
    # (min(p, inf) is p for the others).
    stall = np.where(draws[9] < cal.loss_plateau_fraction, draws[10], np.inf)[:, None]
    true_loss = np.minimum(p, stall)
    true_loss /= -loss_tau  # -p / tau
    np.exp(true_loss, out=true_loss)
    true_loss *= 1 - loss_floor
    true_loss += loss_floor
    proxy = proxy_amp * proxy_shape

    # One call: the eval noise, then the loss noise, as two calls in that order draw them.
    z = noise_rng.standard_normal((2, n, k))
    obs_eval, loss = z  # true + sigma * z, each computed in its own noise row
    obs_eval *= eval_noise
    obs_eval += true_eval
    loss *= cal.loss_noise
    loss += true_loss
    np.maximum(loss, 0.0, out=loss)
    return Curves(p, true_eval, obs_eval, loss, proxy, peak)


def _gao_rows(x: np.ndarray, base: np.ndarray, amp: np.ndarray) -> np.ndarray:
    """``base + amp * gao_shape(x)`` for ``x > 0``, into one array."""
    out = _gao_positive(x)
    out *= amp
    out += base
    return out


def _saturating_rows(
    p: np.ndarray, tau: np.ndarray, base: np.ndarray, amp: np.ndarray
) -> np.ndarray:
    """``base + amp * saturating_shape(p, tau)``, into one array."""
    out = saturating_shape(p, tau)
    out *= amp
    out += base
    return out
