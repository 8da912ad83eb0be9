"""FROZEN REFERENCE, never edited with the code: the per-episode draws and tables as written
before their vectorisation.

Kept verbatim as the reference the fast paths are tested against
(``tests/sim/test_vectorised_draws.py``): the same generator calls in the same
order, the same float operations, one NumPy call per parameter or job type.
"""

from __future__ import annotations

import numpy as np

from evalstop_gym.sim.calibration import Calibration
from evalstop_gym.sim.synthetic_curves import (
    Curves,
    gao_shape,
    rise_decline_peak,
    rise_decline_shape,
    saturating_shape,
)
from evalstop_gym.sim.workloads import RLHF, JobBatch, Workload, check_fits


def assign_types(
    rng: np.random.Generator, n: int, mix: tuple[float, ...], hack_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """Types by ``rng.choice`` and hack labels by a second ``random`` call."""
    types = rng.choice(3, size=n, p=np.asarray(mix) / sum(mix))
    hack_draw = rng.random(n)
    hacking = (types == RLHF) & (hack_draw < hack_fraction)
    return types.astype(np.int64), hacking


def generate_jobs(workload: Workload, num_gpus: int, rng: np.random.Generator) -> JobBatch:
    """The synthetic episode, one pass per job type."""
    n = workload.n_jobs
    check_fits(workload, num_gpus)
    rate = workload.arrival_rate(num_gpus)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n))
    arrivals -= arrivals[0]
    types, hacking = assign_types(rng, n, workload.type_mix, workload.hack_fraction)
    gpus = np.empty(n, dtype=np.int64)
    duration = np.empty(n)
    z = rng.standard_normal(n)
    gpu_u = rng.random(n)
    for t, prof in enumerate(workload.profiles):
        sel = types == t
        cdf = np.cumsum(prof.gpu_probs) / sum(prof.gpu_probs)
        gpus[sel] = np.asarray(prof.gpus)[np.searchsorted(cdf, gpu_u[sel], side="right")]
        duration[sel] = prof.duration_median_h * np.exp(prof.duration_log_sd * z[sel])
    estimate = duration * np.exp(workload.estimate_log_sd * rng.standard_normal(n))
    return JobBatch(arrivals, types, gpus, duration, estimate, hacking)


def sample_curves(
    batch: JobBatch,
    cal: Calibration,
    eval_noise: float,
    rng: np.random.Generator,
    noise_rng: np.random.Generator,
) -> Curves:
    """The curves, each family computed on its own jobs' rows."""
    n, k = len(batch), cal.evals_per_job
    p = np.arange(1, k + 1) / k
    types = batch.job_type
    rlhf = types == RLHF
    hacking = batch.hacking
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
    lo = np.array([r[0] for r in ranges], dtype=float)[:, None]
    hi = np.array([r[1] for r in ranges], dtype=float)[:, None]
    draws = rng.uniform(lo, hi, size=(len(ranges), n))
    rl_base, rl_amp, hack_peak, healthy_peak = draws[0], draws[1], draws[2], draws[3]
    sft_base, sft_amp, sft_tau = draws[4], draws[5], draws[6]
    loss_floor, loss_tau = draws[7], draws[8]
    plateau = draws[9] < cal.loss_plateau_fraction
    plateau_at, proxy_amp = draws[10], draws[11]
    peak = np.where(hacking, hack_peak, np.where(rlhf, healthy_peak, np.inf))
    rl, sft = np.flatnonzero(rlhf), np.flatnonzero(~rlhf)
    true_eval = np.empty((n, k))
    if cal.rlhf_shape == "gao":
        true_eval[rl] = rl_base[rl, None] + rl_amp[rl, None] * gao_shape(
            p[None, :] / peak[rl, None]
        )
    else:
        tau, onset, drop = (
            rng.uniform(r[0], r[1], size=n) for r in (cal.rlhf_tau, cal.hack_onset, cal.hack_drop)
        )
        drop = np.where(hacking & rlhf, drop, 0.0)
        true_eval[rl] = rl_base[rl, None] + rl_amp[rl, None] * rise_decline_shape(
            p[None, :], tau[rl, None], onset[rl, None], drop[rl, None]
        )
        peak = np.where(rlhf & hacking, rise_decline_peak(tau, onset, drop), np.inf)
    true_eval[sft] = sft_base[sft, None] + sft_amp[sft, None] * saturating_shape(
        p[None, :], sft_tau[sft, None]
    )
    p_loss = np.where(plateau[:, None], np.minimum(p[None, :], plateau_at[:, None]), p[None, :])
    true_loss = loss_floor[:, None] + (1 - loss_floor[:, None]) * np.exp(
        -p_loss / loss_tau[:, None]
    )
    proxy = proxy_amp[:, None] * saturating_shape(p, np.float64(0.5))[None, :]
    z_eval = noise_rng.standard_normal((n, k))
    z_loss = noise_rng.standard_normal((n, k))
    obs_eval = true_eval + eval_noise * z_eval
    loss = np.maximum(true_loss + cal.loss_noise * z_loss, 0.0)
    return Curves(p, true_eval, obs_eval, loss, proxy, peak)


def observation_rows(
    fields: tuple[str, ...],
    job_type: np.ndarray,
    declines: np.ndarray,
    obs_eval: np.ndarray,
    loss: np.ndarray,
    window: int,
    n_types: int,
    bounds: dict[str, tuple[float, float]],
) -> np.ndarray:
    """The observation table as one ``np.take`` from a per-job source matrix."""
    n, k = obs_eval.shape
    source = np.concatenate(
        [
            np.eye(n_types, dtype=np.float32)[job_type],
            _padded(obs_eval, window, *bounds["evals"]),
            _padded(loss, window, *bounds["loss"]),
            declines.astype(np.float32),
            np.broadcast_to((np.arange(1, k + 1) / k).astype(np.float32), (n, k)),
            np.broadcast_to(np.array([0.0, 1.0], np.float32), (n, 2)),
        ],
        axis=1,
    )
    return np.take(source, _row_layout(fields, window, k, n_types), axis=1)


def _padded(values: np.ndarray, window: int, lo: float, hi: float) -> np.ndarray:
    """(n, W + K) float32: W zeros, then the values, clipped."""
    n, k = values.shape
    padded = np.zeros((n, window + k), dtype=np.float32)
    padded[:, window:] = values
    if padded.size and (padded.max() > hi or padded.min() < lo):
        np.clip(padded, lo, hi, out=padded)
    return padded


def _row_layout(fields: tuple[str, ...], window: int, k: int, n_types: int) -> np.ndarray:
    """(K, D) column indices into the source matrix of :func:`observation_rows`."""
    off_ev = n_types
    off_loss = off_ev + window + k
    off_dec = off_loss + window + k
    off_prog = off_dec + k
    zero, one = off_prog + k, off_prog + k + 1
    rows = []
    for c in range(k):
        row: list[int] = []
        for f in fields:
            if f == "job_type":
                row += range(n_types)
            elif f in ("evals", "loss"):
                off = off_ev if f == "evals" else off_loss
                row += [off + c + 1 + s for s in range(window)]
                row += [one if c + 1 + s >= window else zero for s in range(window)]
            elif f == "consecutive_declines":
                row.append(off_dec + c)
            elif f == "progress":
                row.append(off_prog + c)
        rows.append(row)
    return np.asarray(rows, dtype=np.intp)
