"""CurveOracle: the optimum knowing each job's curve but not its future noise."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from baselines import CurveOracle, NoStop, scripted_policies
from baselines.bayes import BayesStopper
from baselines.curve_oracle import JobPlan, job_sigmas, job_unit_costs, norm_cdf, solve_job
from baselines.evaluate import play_episode
from baselines.oracle import Oracle, OracleStopper
from evalstop_gym import suite_task
from evalstop_gym.envs.config import EvalStopConfig
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim import make_simulator
from evalstop_gym.sim.engine import Simulator
from evalstop_gym.sim.utility import stop_values
from evalstop_gym.sim.workloads import get_workload


def monte_carlo(plan: JobPlan, n: int, seed: int) -> tuple[float, float]:
    """(mean, standard error) of the utility term of ``plan``'s own policy over ``n`` noise draws."""
    t, k = plan.true_eval, plan.k
    y = t + plan.sigma * np.random.default_rng(seed).standard_normal((n, k))
    m = np.zeros(n, dtype=int)
    b = y[:, 0].copy()
    value = np.full(n, np.nan)
    alive = np.ones(n, dtype=bool)
    for i in range(1, k):  # the decision after checkpoint i, vectorised over the draws
        cont = np.empty(n)
        for mm in range(i):
            sel = m == mm
            cont[sel] = np.interp(b[sel], plan.grid, plan.cont[i][mm])
        stop_val = t[m] - plan.unit_cost * i
        stop = alive & ~(cont > stop_val)
        value[stop] = stop_val[stop]
        alive &= ~stop
        better = y[:, i] > b
        m = np.where(better, i, m)
        b = np.where(better, y[:, i], b)
    final = t[m] if plan.deliver_best else np.full(n, t[-1])
    value[alive] = final[alive] - plan.unit_cost * k
    return float(value.mean()), float(value.std() / math.sqrt(n))


TINY = np.array([0.30, 0.52, 0.47, 0.55, 0.20])


def test_norm_cdf_matches_erf() -> None:
    """The tabulated CDF agrees with math.erfc to 1e-7 and saturates beyond the table."""
    x = np.linspace(-12, 12, 2001)
    exact = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    assert np.max(np.abs(norm_cdf(x) - exact)) < 1e-7


@pytest.mark.parametrize("deliver_best", [True, False])
def test_value_equals_monte_carlo_of_its_own_policy(deliver_best: bool) -> None:
    """The programme's W_0 is what its policy earns, within Monte-Carlo error."""
    plan = solve_job(TINY, 0.08, 0.02, deliver_best)
    mean, se = monte_carlo(plan, 200_000, seed=1)
    assert abs(mean - plan.value) < 4 * se + 1e-3


def test_no_fixed_stop_time_beats_the_programme() -> None:
    """Ending every draw after the same checkpoint (any of them) earns less than W_0."""
    plan = solve_job(TINY, 0.08, 0.02, True)
    k, n = len(TINY), 200_000
    y = TINY + 0.08 * np.random.default_rng(2).standard_normal((n, k))
    best = np.zeros((n, k), dtype=int)  # the best observed checkpoint after each checkpoint
    for i in range(1, k):
        prev = best[:, i - 1]
        best[:, i] = np.where(y[:, i] > y[np.arange(n), prev], i, prev)
    fixed = [float((TINY[best[:, i - 1]] - 0.02 * i).mean()) for i in range(1, k + 1)]
    assert max(fixed) < plan.value
    assert plan.value <= TINY.max() - 0.02  # and nothing earns more than the best checkpoint


def test_noise_free_job_stops_at_its_curve_optimum() -> None:
    """sigma = 0: the first maximum of S_i, continuing only when a later S_j is strictly larger."""
    plan = solve_job(TINY, 0.0, 0.02, True)
    s = [TINY[: i + 1].max() - 0.02 * (i + 1) for i in range(len(TINY))]
    assert plan.value == pytest.approx(max(s))
    first = int(np.argmax(s)) + 1
    for i in range(1, first + 1):  # along its own path: continue up to the optimum, stop there
        m = int(np.argmax(TINY[:i]))
        assert plan.stops(i, m, float(TINY[m])) == (i == first)


def _kwargs(task: str, n_jobs: int = 50, **extra: object) -> dict[str, object]:
    kw = dict(suite_task(task), n_jobs=n_jobs)
    kw.update(extra)
    return kw


def test_noise_free_episode_stops_where_the_curve_optimum_is() -> None:
    """With eval_noise = 0 every job ends at the first optimum of its curve at the type-mean price."""
    kw = _kwargs("hard-0.12", eval_noise=0.0)
    for seed in (0, 1):
        row, record = play_episode(CurveOracle(), seed, kw)
        profiles = get_workload("heavy-rlhf").profiles
        mean_gh = np.array([p.mean_gpu_hours() for p in profiles])[record.job_type]
        t = record.true_eval  # the observed evals are these too: no noise
        values = stop_values(t, t, mean_gh, kw["gpu_hour_price"], True)
        np.testing.assert_array_equal(record.ckpt_done, np.argmax(values, axis=1) + 1)
        assert row["policy"] == "CurveOracle"


def _stop_points(sim: Simulator, price: float) -> np.ndarray:
    actor = CurveOracle().bind(sim, price)
    while sim.next_decision() is not None:
        sim.decide(actor.act_pending())
    return np.array([sim.checkpoints_done(j) for j in range(sim.n_jobs)])


def test_decisions_ignore_hidden_labels_beyond_the_curve() -> None:
    """Flipping hack labels and peaks and redrawing durations leaves every stop point alone."""
    config = EvalStopConfig.from_kwargs(**_kwargs("hard-0.12")).sim_config
    price = 1.2e-3
    sim = make_simulator(config, 3)
    batch, curves = sim.batch, sim.curves
    ref = _stop_points(sim, price)
    rng = np.random.default_rng(0)
    other_batch = dataclasses.replace(
        batch,
        hacking=~batch.hacking,
        duration_h=batch.duration_h * rng.uniform(0.5, 2.0, len(batch)),
    )
    other_curves = dataclasses.replace(curves, peak_progress=rng.uniform(0, 1, len(batch)))
    other = Simulator(config, 3, jobs=(other_batch, other_curves))
    np.testing.assert_array_equal(_stop_points(other, price), ref)


def test_corpus_sigma_is_the_residual_rms() -> None:
    """On a corpus task a job's sigma is the RMS of obs - true; LoRA/DPO jobs (exact evals) get 0."""
    kw = _kwargs("trl-gao")
    sim = make_simulator(EvalStopConfig.from_kwargs(**kw).sim_config, 0)
    sig = job_sigmas(sim)
    r = sim.curves.obs_eval - sim.curves.true_eval
    np.testing.assert_allclose(sig, np.sqrt((r * r).mean(axis=1)))
    assert np.all(sig[sim.batch.job_type != 2] == 0) and np.all(sig[sim.batch.job_type == 2] > 0)
    synthetic = make_simulator(EvalStopConfig.from_kwargs(**_kwargs("hard-0.05")).sim_config, 0)
    assert np.all(job_sigmas(synthetic) == 0.05)
    c = job_unit_costs(synthetic, 1e-3)
    assert c[synthetic.batch.job_type == 2][0] == pytest.approx(1e-3 * 126.91262674348455 / 20)


def test_privileged_protocol_and_oracle_unchanged() -> None:
    """play_episode binds privileged stoppers; None and OracleStopper() are the same Oracle."""
    kw = _kwargs("paper-0.12", n_jobs=20)
    a, rec_a = play_episode(None, 5, kw)
    b, rec_b = play_episode(OracleStopper(), 5, kw)
    assert a["policy"] == b["policy"] == "Oracle"
    assert a["utility"] == b["utility"]
    np.testing.assert_array_equal(rec_a.ckpt_done, rec_b.ckpt_done)
    sim = make_simulator(EvalStopConfig.from_kwargs(**kw).sim_config, 5)
    assert isinstance(OracleStopper().bind(sim, 1e-3), Oracle)
    assert CurveOracle.privileged and OracleStopper.privileged
    assert not any(isinstance(p, CurveOracle) for p in scripted_policies())


def test_bad_grid_is_refused() -> None:
    """max_grid outside [64, 16384] is one ConfigError naming it."""
    with pytest.raises(ConfigError, match="max_grid"):
        CurveOracle(max_grid=8)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["hard-0.12", "paper-0.12"])
def test_between_bayes_and_the_oracle(task: str) -> None:
    """Over 30 seeds: mean U(Bayes) <= mean U(CurveOracle); per episode U(CurveOracle) <= U(Oracle)."""
    kw = _kwargs(task)
    bayes = BayesStopper.from_env_kwargs(kw)
    u: dict[str, list[float]] = {"NoStop": [], "Bayes": [], "CurveOracle": [], "Oracle": []}
    for seed in range(500, 530):
        for name, pol in (
            ("NoStop", NoStop()),
            ("Bayes", bayes),
            ("CurveOracle", CurveOracle()),
            ("Oracle", None),
        ):
            u[name].append(play_episode(pol, seed, kw)[0]["utility"])
    arr = {k: np.array(v) for k, v in u.items()}
    # Exact per job (the Oracle maximises the same table), so per episode too.
    assert np.all(arr["CurveOracle"] <= arr["Oracle"] + 1e-9)
    assert arr["Bayes"].mean() <= arr["CurveOracle"].mean()
    assert arr["CurveOracle"].mean() > arr["NoStop"].mean()
