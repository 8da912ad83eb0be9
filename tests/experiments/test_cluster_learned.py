"""E13: the queue-priced Bayes stopper, its rule fit and its table."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401
from baselines.bayes import BayesStopper
from baselines.policies import observed
from evalstop_experiments.experiments import EXPERIMENTS
from evalstop_experiments.experiments import cluster_learned as cl
from evalstop_experiments.plan import ReproduceOptions


def test_critical_multiplier_is_where_bayes_flips():
    """Bayes at 1x and 2x the price stops exactly where the flip multiplier says."""
    kw = cl.cluster_kwargs(1.0, n_jobs=15)
    one, two = BayesStopper.from_env_kwargs(kw), BayesStopper.from_env_kwargs(kw, 2.0)
    env = gym.make("EvalStop-v0", **kw)
    obs, _ = env.reset(seed=3)
    done, n, stops = False, 0, [0, 0]
    while not done:
        m = cl.critical_multiplier(one, int(np.argmax(obs["job_type"])), observed(obs["evals"]))
        assert one.act(obs) == int(m <= 1.0)
        assert two.act(obs) == int(m <= 2.0)
        stops[0] += int(m <= 1.0)
        stops[1] += int(m <= 2.0)
        obs, _, done, _, _ = env.step(0)
        n += 1
    assert n > 50 and 0 < stops[0] < stops[1]  # the check saw both decisions


def test_queue_priced_bayes_at_one_is_bayes_on_the_cluster():
    """m = 1 everywhere plays Bayes itself: the same utility and JCT on the cluster env."""
    kw = cl.cluster_kwargs(1.3, n_jobs=30)
    bayes = BayesStopper.from_env_kwargs(kw)
    a = cl.play_cluster(kw, 2, cl.QueuePricedBayes(bayes, cl.PriceRule(1.0)))
    b = cl.play_cluster(kw, 2, cl.PerJob(bayes))
    assert a == b


def test_price_rules():
    """The multiplier grows with the queue up to the cap; flat rules are queue-blind."""
    r = cl.PriceRule(1.0, 2.0, 10.0)
    assert r.multiplier(0) == 1.0 and r.multiplier(5) == 2.0 and r.multiplier(50) == 3.0
    assert not r.queue_blind and cl.PriceRule(1.5).queue_blind
    grid = cl.rule_grid()
    assert sum(g.queue_blind for g in grid) == len(cl.FLATS)
    assert str(r) == "m = 1 + 2 min(q, 10)/10"


def test_e13_runs_only_when_asked():
    """Registered in reproduce, but a default run does not fit rules."""
    exp = next(e for e in EXPERIMENTS if e.id == "E13")
    assert not exp.runs(ReproduceOptions())
    assert exp.runs(ReproduceOptions(experiments=("E13",)))
    assert exp.runs(ReproduceOptions(cluster_learned=True))
    assert not exp.runs(ReproduceOptions(experiments=("E13",), cluster_learned=False))


@pytest.mark.slow
def test_fit_and_compare_make_the_table(tmp_path):
    """A tiny fit and comparison: a row per stopper, Bayes at score 1 and J 0 against itself."""
    rules = cl.fit_rules([1.3], [cl.TRAIN_SEED_BASE], n_jobs=20)
    assert rules["blind"].queue_blind
    assert rules["objective"][str(rules["aware"])] >= rules["objective"][str(rules["blind"])]
    rows = cl.compare([1.3], [0, 1], rules, n_jobs=20)
    names = [r["stopper"] for r in rows]
    assert names[:2] == [cl.NOSTOP, cl.EVALSTOP] and names[2].startswith(cl.FLOOR)
    bayes = next(r for r in rows if r["stopper"] == cl.BAYES)
    assert bayes["score"] == pytest.approx(1.0) and bayes["j_vs_bayes"] == 0.0
    lines = cl.section(rows)
    assert lines[0].startswith("## E13") and sum(x.startswith("| 1.3 |") for x in lines) == 6


def test_critical_multiplier_refuses_a_probing_family():
    """The flip point is linear in the price only for fixed ends; the grounded family probes."""
    from evalstop_gym.errors import ConfigError
    from evalstop_gym.sim.workloads import RLHF

    with pytest.raises(ConfigError, match="does not probe"):
        cl.critical_multiplier(BayesStopper.for_task("grounded-0.05"), RLHF, np.array([0.3, 0.32]))
