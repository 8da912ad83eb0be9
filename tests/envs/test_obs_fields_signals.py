"""The opt-in training-side signals of ``obs_fields`` (KL, entropy, ...).

Off by default: the default observation is the boundary's, bit for bit, and asking
for signals leaves the boundary fields' values untouched.  A signal is the logged
series of the run a job replays, in the eval window's layout; a synthetic job marks
it absent; no hidden field can be asked for.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401  (registers the envs)
from evalstop_gym import BOUNDARY_FIELDS, HIDDEN_FIELDS, write_traces
from evalstop_gym.corpus import read_traces
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.envs.config import EvalStopConfig, parse_obs_fields
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.signals import SIGNAL_FIELDS, resample_signal
from evalstop_gym.sim.workloads import RLHF

CORPUS = str(corpus_path(TRL_CORPUS))
SMALL = {"curves": CORPUS, "n_jobs": 24}


def _episode(seed: int, steps: int = 200, **kwargs) -> list[dict[str, np.ndarray]]:
    env = gym.make("EvalStop-v0", **kwargs)
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    for _ in range(steps):
        obs, _, term, trunc, _ = env.step(0)
        seen.append(obs)
        if term or trunc:
            break
    return seen


def test_the_default_observation_is_the_boundary_alone() -> None:
    env = gym.make("EvalStop-v0", **SMALL)
    assert tuple(env.unwrapped.layout.fields) == BOUNDARY_FIELDS
    assert set(env.observation_space.spaces) == set(BOUNDARY_FIELDS)
    assert EvalStopConfig.from_kwargs(**SMALL).obs_fields == BOUNDARY_FIELDS


def test_asking_for_signals_leaves_every_boundary_value_bit_identical() -> None:
    plain = _episode(3, **SMALL)
    more = _episode(3, **SMALL, obs_fields=["kl", "reward"])
    assert len(plain) == len(more) > 20
    for a, b in zip(plain, more, strict=True):
        assert set(b) == set(BOUNDARY_FIELDS) | {"kl", "reward"}
        for f in BOUNDARY_FIELDS:
            assert a[f].dtype == b[f].dtype and np.array_equal(a[f], b[f]), f


def test_signals_alone_add_to_the_boundary_and_come_after_it() -> None:
    assert parse_obs_fields(["kl"], signals=True) == (*BOUNDARY_FIELDS, "kl")
    assert parse_obs_fields("kl,evals", signals=True) == ("evals", "kl")
    with pytest.raises(ConfigError, match="obs_fields"):
        parse_obs_fields(["kl"])  # the boundary-only reader (live stoppers) refuses them


def test_a_signal_is_the_replayed_runs_series_in_the_eval_windows_layout() -> None:
    w = 4
    env = gym.make("EvalStop-v0", **SMALL, eval_window=w, obs_fields=["evals", "kl"])
    obs, _ = env.reset(seed=5)
    core = env.unwrapped.core
    checked = {"rlhf": 0, "other": 0}
    for _ in range(300):
        sim, jid, ckpt = core.sim, core.jid, core.ckpt
        trace = sim.curves.signal_runs[jid] if sim.curves.signal_runs else None
        kl = obs["kl"]
        filled = min(ckpt, w)
        if sim.batch.job_type[jid] == RLHF:
            assert trace is not None
            full = resample_signal(trace, "kl", sim.curves.obs_eval.shape[1])
            expect = full[ckpt - filled : ckpt].astype(np.float32)
            np.testing.assert_array_equal(kl[w - filled : w], expect)
            np.testing.assert_array_equal(kl[w:], obs["evals"][w:])  # same mask as the evals
            checked["rlhf"] += 1
        else:
            assert trace is None and not kl.any()  # absent: values and mask 0
            checked["other"] += 1
        obs, _, term, trunc, _ = env.step(0)
        if term or trunc:
            break
    assert checked["rlhf"] > 10 and checked["other"] > 10


def test_the_flat_env_carries_the_signals_too() -> None:
    env = gym.make("EvalStopFlat-v0", **SMALL, obs_fields=["progress", "kl"])
    obs, _ = env.reset(seed=0)
    w = gym.make("EvalStop-v0", **SMALL).unwrapped.window
    assert obs.shape == env.observation_space.shape == (1 + 2 * w,)
    assert env.observation_space.contains(obs)


@pytest.mark.parametrize(
    "field",
    sorted({*HIDDEN_FIELDS, "gold", "label", "true_eval", "duration", "signal_runs", "eval"}),
)
def test_no_hidden_field_can_be_asked_for(field) -> None:
    with pytest.raises(ConfigError, match="obs_fields"):
        gym.make("EvalStop-v0", **SMALL, obs_fields=["evals", field])


def test_a_signal_no_run_logged_is_refused_in_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"obs_fields='kl'.*synthetic curves") as err:
        gym.make("EvalStop-v0", n_jobs=10, obs_fields=["kl"])
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"obs_fields='entropy'.*some run.*\(reward, kl\)"):
        gym.make("EvalStop-v0", **SMALL, obs_fields=["entropy"])
    # Runs without KL (TRL logs none at beta=0): their jobs see it absent, the others
    # see it; a corpus none of whose runs logged it cannot offer it.
    traces = read_traces(CORPUS)
    hacking = [i for i, t in enumerate(traces) if t.label]
    for i in hacking:
        traces[i] = dataclasses.replace(traces[i], kl=None)
    write_traces(traces, tmp_path / "c.jsonl")
    seen = {True: 0, False: 0}
    for obs in _episode(1, curves=str(tmp_path / "c.jsonl"), n_jobs=24, obs_fields=["kl"]):
        if obs["job_type"][RLHF] == 1 and obs["evals"][-1] == 1:
            seen[bool(obs["kl"][-1] == 1)] += 1
    assert seen[True] > 0 and seen[False] > 0
    write_traces([dataclasses.replace(t, kl=None) for t in traces], tmp_path / "none.jsonl")
    with pytest.raises(ConfigError, match=r"obs_fields='kl'.*some run of .* logged \(reward\)"):
        gym.make("EvalStop-v0", curves=str(tmp_path / "none.jsonl"), obs_fields=["kl"])


def test_every_signal_name_is_an_allowed_value_of_the_argument() -> None:
    from evalstop_gym.envs.config import allowed_values

    assert allowed_values()["obs_fields"] == BOUNDARY_FIELDS + SIGNAL_FIELDS
    assert not set(SIGNAL_FIELDS) & set(HIDDEN_FIELDS)


def test_the_signals_snippet_runs() -> None:
    from readme_snippets import run_snippet

    ns = run_snippet("signals")
    assert ns["kl_present"].shape == ns["kl_values"].shape
