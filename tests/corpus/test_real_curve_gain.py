"""A corpus run whose gold peaks at its first checkpoint is scaled sanely: never a ~-6e8 return."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from baselines import NoStop, evaluate
from evalstop_gym.corpus import CurveTrace, read_traces, write_traces
from evalstop_gym.corpus.packaged import corpus_path
from evalstop_gym.envs import EvalStopEnv
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.real_curves import GAIN_FLOOR_FRACTION, gold_gain

STEPS = np.arange(0, 100, 10)


def _run(run_id: str, gold: np.ndarray) -> CurveTrace:
    from evalstop_gym.corpus import label_hacking

    return CurveTrace(
        run_id,
        STEPS,
        gold + 0.01 * np.sin(np.arange(len(gold))),
        np.linspace(1.0, 0.4, len(gold)),
        gold=gold,
        label=label_hacking(gold),
    )


def _corpus(tmp_path, first_run_gold: np.ndarray) -> str:
    healthy = _run("healthy", np.linspace(0.0, 1.0, len(STEPS)))
    peaked = _run("peaks-at-once", first_run_gold)
    path = tmp_path / "c.jsonl"
    write_traces([peaked, healthy], path)
    return str(path)


def test_a_run_peaking_at_its_first_checkpoint_gives_a_bounded_return(tmp_path) -> None:
    gold = np.linspace(1.0, 0.2, len(STEPS))  # never above its first value
    path = _corpus(tmp_path, gold)
    assert read_traces(path)[0].label is True
    with pytest.warns(UserWarning, match="'peaks-at-once'.*floored gain"):
        env = EvalStopEnv(curves=path, n_jobs=30, calibration="realistic")
        env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = evaluate(NoStop(), seeds=range(2), n_jobs=30, calibration="realistic", curves=path)
    returns = np.array([m["return"] for m in out])
    assert np.all(np.isfinite(returns)) and np.abs(returns).max() < 1e3
    t = read_traces(path)[0]
    assert gold_gain(t) == pytest.approx(GAIN_FLOOR_FRACTION * 0.8)


def test_a_run_with_constant_gold_is_refused_naming_it(tmp_path) -> None:
    path = _corpus(tmp_path, np.full(len(STEPS), 0.5))
    with pytest.raises(ConfigError, match="'peaks-at-once' has constant gold"):
        EvalStopEnv(curves=path, n_jobs=10).reset(seed=0)


@pytest.mark.parametrize("name", ["trl_gao", "micro_rlhf_quick", "trl_gao_quick"])
def test_the_shipped_corpora_keep_their_scales(name) -> None:
    for t in read_traces(corpus_path(name)):
        assert gold_gain(t) == float(np.max(t.gold)) - float(t.gold[0])
