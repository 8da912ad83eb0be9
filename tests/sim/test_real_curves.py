"""RLHF jobs on real curves from a trace corpus (SimConfig(curves=...))."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from toy_traces import toy_trace

from evalstop_gym import ConfigError, KDeclineRule, SimConfig, Simulator
from evalstop_gym.corpus import CurveTrace, write_traces
from evalstop_gym.sim.workloads import RLHF


@pytest.fixture
def corpus(tmp_path: Path) -> str:
    p = tmp_path / "corpus.jsonl"
    hack = toy_trace("hack", [0, 1, 2, 3, 4, 3, 2, 1, 0, -1, -2], True)
    healthy = toy_trace("healthy", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], False)
    write_traces([hack, healthy], p)
    return str(p)


def test_rlhf_jobs_run_on_the_corpus_curves(corpus: str) -> None:
    sim = Simulator(SimConfig(curves=corpus, n_jobs=40), 0)
    c, b = sim.curves, sim.batch
    k = c.true_eval.shape[1]
    p = np.arange(1, k + 1) / k
    hack_gold = np.interp(p, np.arange(11) / 10, [0, 1, 2, 3, 4, 3, 2, 1, 0, -1, -2])
    healthy_gold = np.interp(p, np.arange(11) / 10, np.arange(11.0))
    for j in np.flatnonzero(b.job_type == RLHF):
        if b.hacking[j]:
            np.testing.assert_allclose(c.true_eval[j], 0.3 + 0.6 * hack_gold / 4)
            assert c.peak_progress[j] == pytest.approx(0.4)
        else:
            np.testing.assert_allclose(c.true_eval[j], 0.3 + 0.6 * healthy_gold / 10)
            assert np.isinf(c.peak_progress[j])
        # default extra noise is 0: observed = the run's measured eval, same scale
        scale = 0.6 / (4 if b.hacking[j] else 10)
        np.testing.assert_allclose(c.obs_eval[j] - c.true_eval[j], 0.01 * scale)
        assert c.loss[j][0] <= 1.0 and c.loss[j][-1] == pytest.approx(0.2)
    m = sim.run(KDeclineRule(2))
    assert m["recall"] > 0.9 and m["fpr"] == 0.0


def test_extra_noise_on_real_curves(corpus: str) -> None:
    a = Simulator(SimConfig(curves=corpus, n_jobs=30), 1).curves
    b = Simulator(SimConfig(curves=corpus, n_jobs=30, eval_noise=0.05), 1).curves
    np.testing.assert_array_equal(a.true_eval, b.true_eval)
    assert not np.allclose(a.obs_eval, b.obs_eval)


def test_corpus_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"curves=.*existing curve-trace"):
        SimConfig(curves=str(tmp_path / "missing.jsonl"))
    p = tmp_path / "only_healthy.jsonl"
    write_traces([toy_trace("h", list(range(11)), False)], p)
    with pytest.raises(ConfigError, match="at least one hacking run"):
        Simulator(SimConfig(curves=str(p), n_jobs=20, hack_fraction=1.0), 0)
    q = tmp_path / "nolabel.jsonl"
    t = toy_trace("x", list(range(11)), False)
    write_traces([CurveTrace(t.run_id, t.step, t.eval, t.loss)], q)
    with pytest.raises(ConfigError, match="gold and label"):
        Simulator(SimConfig(curves=str(q), n_jobs=5), 0)


def test_env_accepts_curves(corpus: str) -> None:
    from baselines import EvalStop, evaluate

    rows = evaluate(EvalStop(), [0], curves=corpus, n_jobs=20)
    assert rows[0]["n_jobs"] == 20.0
