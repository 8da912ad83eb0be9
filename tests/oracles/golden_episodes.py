"""Whole-episode results that every optimisation must reproduce bit for bit.

``collect()`` runs a fixed set of episodes through the public API only (the
Gymnasium env with seeded pseudo-random actions, and ``Simulator.run`` with
EvalStop's k-decline rule on synthetic workloads and on the shipped Philly
sample) and returns, per case, the exact metrics (as ``float.hex``) and a
SHA-256 digest of every observation, reward, flag and ``info`` of every step.

The stored fixture ``tests/data/golden_episodes.json`` was written from the
engine of commit 1524925 (before the speed work of issue #15): with a git
worktree of that commit at REF, from the root of this repository::

    PYTHONPATH=REF python tests/oracles/golden_episodes.py

(the script uses only the public API, which that commit already had).

Regenerate it only for a deliberate change of results, and say so in the commit.

Two copies per fixture, one per kind of float64 ``exp``/``log`` numpy runs
(:func:`float_kernels`): on a CPU with AVX-512 numpy uses its own SIMD kernels,
elsewhere the C library's, and the two differ in the last bit of some values.
``<stem>.json`` was written on an AVX-512 machine; ``<stem>.no-avx512.json`` on
a machine without it, from commit 81203af (whose results the AVX-512 copy had
confirmed bit for bit), so both pin the same code.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import evalstop_gym
from evalstop_gym import SAMPLE_TRACE, KDeclineRule, SimConfig, Simulator


def float_kernels() -> str:
    """``"avx512"`` if numpy runs its AVX-512 float64 exp/log kernels here, else ``"no-avx512"``."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__
    return "avx512" if __cpu_features__.get("AVX512F") else "no-avx512"


def fixture_path(stem: str) -> Path:
    """The stored fixture ``stem`` for this machine's float kernels (see the module docstring)."""
    suffix = "" if float_kernels() == "avx512" else ".no-avx512"
    return Path(__file__).parents[1] / "data" / f"{stem}{suffix}.json"


FIXTURE = fixture_path("golden_episodes")
SCHEDULER_NAMES = ("fifo", "sjf-est", "srtf-est", "loss-aware", "tiresias")


def _hex(v: Any) -> str:
    v = float(v)
    return "nan" if math.isnan(v) else v.hex()


def _hex_metrics(m: dict[str, float]) -> dict[str, str]:
    return {k: _hex(v) for k, v in sorted(m.items())}


def _env_case(
    seed: int,
    stop_p: float,
    env_id: str = "EvalStop-v0",
    act: Callable[[np.random.Generator, gym.Env], Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """One seeded episode with pseudo-random actions: stop with probability ``stop_p``.

    ``act(rng, env)`` replaces that rule (e.g. for deprioritising, or an env
    with a vector of actions).
    """
    env = gym.make(env_id, **kwargs)
    rng = np.random.default_rng(seed + 1000)
    h = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    steps, total = 0, 0.0
    while True:
        # A dict observation field by field; a flat one (EvalStopFlat-v0) as one field.
        for k, v in sorted(obs.items()) if isinstance(obs, dict) else [("obs", obs)]:
            h.update(k.encode())
            h.update(np.ascontiguousarray(v, dtype=np.float32).tobytes())
        h.update(repr(sorted((k, v) for k, v in info.items() if k != "episode_metrics")).encode())
        action = int(rng.random() < stop_p) if act is None else act(rng, env)
        obs, reward, terminated, truncated, info = env.step(action)
        h.update(float(reward).hex().encode() + bytes([terminated, truncated]))
        total += reward
        steps += 1
        if terminated or truncated:
            break
    return {
        "steps": steps,
        "return": _hex(total),
        "digest": h.hexdigest(),
        # Every metric, an undefined one (left out of info) as NaN as when stored.
        "metrics": _hex_metrics(
            {k: math.nan if v is None else v for k, v in _metrics_of(env).items()}
        ),
    }


def _metrics_of(env: gym.Env) -> dict[str, float | None]:
    """The episode's metrics (the cluster and flat envs keep them in their inner env)."""
    core = env.unwrapped
    core = getattr(core, "inner", None) or getattr(core, "dict_env", None) or core
    return core.episode_metrics()


def _sim_case(seed: int, **cfg: Any) -> dict[str, Any]:
    sim = Simulator(SimConfig(**cfg), seed, record_events=True)
    m = sim.run(KDeclineRule(2))
    h = hashlib.sha256()
    for e in sim.events or []:
        h.update(f"{e.time.hex()} {e.kind} {e.jid} {e.free_gpus};".encode())
    return {"metrics": _hex_metrics(m), "events": h.hexdigest()}


def _arrays_case(seed: int, **cfg: Any) -> dict[str, Any]:
    """Digest of every drawn array of an episode (jobs and curves, hidden ones included).

    With step-time jitter, the jittered checkpoint times too (no case of the
    1524925 fixture has any, so its digests are unchanged).
    """
    sim = Simulator(SimConfig(**cfg), seed)
    b, c = sim.batch, sim.curves
    h = hashlib.sha256()
    for a in (b.arrival_h, b.job_type, b.gpus, b.duration_h, b.estimate_h, b.hacking):
        h.update(np.ascontiguousarray(a).tobytes())
    for a in (c.progress, c.true_eval, c.obs_eval, c.loss, c.proxy, c.peak_progress):
        h.update(np.ascontiguousarray(a).tobytes())
    if sim.step_frac is not None:
        h.update(np.ascontiguousarray(sim.step_frac, dtype=float).tobytes())
    return {"metrics": {}, "arrays": h.hexdigest()}


def collect() -> dict[str, dict[str, Any]]:
    """Run every golden case and return its results."""
    assert evalstop_gym  # registers EvalStop-v0
    out: dict[str, dict[str, Any]] = {}
    # NB: at n_jobs=30 and the default load no job queues, so the five
    # env-*-utility episodes are the same under every scheduler (the
    # constant-action ones differ); golden_regimes.py adds loaded ones.
    for s in SCHEDULER_NAMES:
        out[f"env-{s}-utility"] = _env_case(3, 0.15, n_jobs=30, scheduler=s)
        out[f"env-{s}-constant"] = _env_case(4, 0.0, n_jobs=20, scheduler=s)
        out[f"sim-{s}-heavy"] = _sim_case(5, n_jobs=120, scheduler=s)
        out[f"sim-{s}-philly-sample"] = _sim_case(6, trace=SAMPLE_TRACE, scheduler=s)
    out["env-system-reward"] = _env_case(7, 0.2, n_jobs=30, reward="system")
    out["env-realistic-window3"] = _env_case(
        8, 0.1, n_jobs=25, calibration="realistic", eval_window=3, scheduler="tiresias"
    )
    out["env-subset-fields"] = _env_case(
        9, 0.3, n_jobs=25, obs_fields="job_type,evals,consecutive_declines", reward="system"
    )
    out["env-philly-sample"] = _env_case(10, 0.1, trace=SAMPLE_TRACE, num_gpus=32)
    out["sim-512-gpus"] = _sim_case(11, n_jobs=300, num_gpus=512, load=1.2)
    out["arrays-paper"] = _arrays_case(12)
    out["arrays-realistic"] = _arrays_case(13, calibration="realistic", workload="balanced")
    out["arrays-philly-sample"] = _arrays_case(14, trace=SAMPLE_TRACE)
    return out


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(collect(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
