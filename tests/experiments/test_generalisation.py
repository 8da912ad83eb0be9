"""E9 (generalisation): the domain-randomised training env and the quick run end to end."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from baselines.training.domain_random import DomainRandomised, domain_kwargs, mixture_tasks
from evalstop_gym.envs.wrappers import JobEpisodes


def _mixture(n_jobs: int = 6) -> DomainRandomised:
    return DomainRandomised(domain_kwargs(mixture_tasks(), n_jobs=n_jobs))


def _regime(env) -> tuple[str, float]:
    cfg = env.unwrapped.config
    return cfg.calibration, cfg.eval_noise


def test_domain_randomised_env_draws_every_regime_and_sigma() -> None:
    env = _mixture()
    seen = []
    env.reset(seed=0)
    for _ in range(80):
        seen.append(_regime(env))
        env.reset()
    assert {c for c, _ in seen} == {"paper", "realistic", "hard"}
    assert {s for _, s in seen} == {0.02, 0.05, 0.12}


def test_domain_randomised_env_is_reproducible_from_its_seed() -> None:
    a, b = _mixture(), _mixture()
    seq = []
    for env in (a, b):
        obs, _ = env.reset(seed=7)
        regimes = [_regime(env)]
        for _ in range(10):
            env.reset()
            regimes.append(_regime(env))
        seq.append((regimes, obs["evals"].tolist()))
    assert seq[0] == seq[1]


def test_job_episodes_compose_with_domain_randomisation() -> None:
    env = JobEpisodes(_mixture(n_jobs=4))
    obs, _ = env.reset(seed=1)
    regimes, n_ckpts = set(), set()
    for _ in range(60):  # 15 cluster episodes of 4 jobs
        done, steps = False, 0
        while not done:
            assert env.observation_space.contains(obs)
            obs, reward, done, _, _ = env.step(0)
            assert np.isfinite(reward)
            steps += 1
        # A job episode lasts its regime's checkpoints: JobEpisodes reads the domain in play.
        assert steps == env.unwrapped.sim.n_ckpt - 1
        regimes.add(_regime(env))
        n_ckpts.add(steps + 1)
        obs, _ = env.reset()
    assert len(regimes) > 1 and n_ckpts == {10, 20}


def test_domains_with_different_observation_fields_are_refused() -> None:
    a, b = domain_kwargs(["paper-0.12", "hard-0.12"], n_jobs=4)
    with pytest.raises(ValueError, match="obs_fields"):
        DomainRandomised([a, {**b, "obs_fields": ["evals", "progress"]}])
    with pytest.raises(ValueError, match="domains"):
        DomainRandomised([])


@pytest.mark.slow
def test_e9_quick_runs_end_to_end_with_every_cell_finite(tmp_path) -> None:
    pytest.importorskip("stable_baselines3")
    from evalstop_experiments.experiments import generalisation as e9
    from evalstop_experiments.reproduce import reproduce

    reproduce(tmp_path, quick=True, experiments=["E9"], progress=False)
    with open(tmp_path / "E9.csv") as fh:
        rows = list(csv.DictReader(fh))
    cells = {(r["train"], r["test"]) for r in rows}
    assert cells == {(tr, te) for tr in e9.QUICK_TRAIN_SETS for te in e9.QUICK_TEST_TASKS}
    assert all(math.isfinite(float(r[k])) for r in rows for k in ("score", "score_lo", "score_hi"))
    report = (tmp_path / "REPORT.md").read_text()
    assert "## E9" in report and "| mix |" in report
    # Each training set's own model: not the seeded initial weights an evaluation taken
    # before the first update would keep (the two models were one network then).
    from baselines.learned import Learned, read_meta

    models = sorted((tmp_path / "e9_models").glob("*.zip"))
    assert len(models) == 2 and all(read_meta(m)["selected"] == "last" for m in models)
    a, b = (Learned(m).model.policy.state_dict() for m in models)
    assert any(not (a[k] == b[k]).all() for k in a)


def test_quick_models_keep_the_last_model_after_their_one_rollout() -> None:
    pytest.importorskip("yaml")
    from evalstop_experiments.experiments import generalisation as e9

    assert e9.rollout_steps(1) == 512 and e9.rollout_steps(None) == 512 * 4
    assert e9.SIZES["quick"]["timesteps"] <= e9.rollout_steps(e9.SIZES["quick"]["n_envs"])
