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
    trains = (e9.FLOOR_ROW, *e9.QUICK_TRAIN_SETS)
    assert cells == {(tr, te) for tr in trains for te in e9.QUICK_TEST_TASKS}
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


def _shipped() -> dict:
    pytest.importorskip("stable_baselines3")
    from baselines.learned import PRETRAINED_DIR
    from evalstop_experiments.experiments import generalisation as e9

    return {e9.SHIPPED: PRETRAINED_DIR / "hard.zip"}


@pytest.mark.parametrize(("task", "seed"), [("hard-0.12", 0), ("paper-0.12", 1)])
def test_batched_model_ends_equal_the_played_episode(task, seed) -> None:
    """Every decision made at once ends each job where playing the episode ends it
    (on ``paper`` through the padded 20-slot window)."""
    _shipped()
    from baselines.evaluate import play_episode
    from baselines.learned import Learned
    from evalstop_experiments.experiments import generalisation as e9
    from evalstop_experiments.scoring import job_observations

    model = Learned.pretrained("hard")
    kw = e9.test_kwargs(task, 30, None, False)
    policy, play_kw = e9._player(model, kw)
    _, record = play_episode(policy, seed, play_kw)
    pad = 20 if e9.checkpoints(kw) < 20 else None
    ends = e9.model_ends(model, job_observations(play_kw, seed), pad)
    assert (ends == record.ckpt_done).all()
    assert (ends < e9.checkpoints(kw)).any() or task == "paper-0.12"


def test_score_rows_carry_the_best_floor_and_the_coverage_blocks() -> None:
    """The floor's row, a model's difference to it, and a model that never stops scoring 0."""
    models = _shipped()
    from evalstop_experiments.experiments import generalisation as e9

    kw = e9.test_kwargs("paper-0.12", 20, None, False)
    floor, shipped = e9.score_models(models, "paper-0.12", range(6), kw)
    assert floor["train"] == e9.FLOOR_ROW and floor["minus_floor"] == 0.0
    assert floor["floor_family"] and floor["score"] > 0
    # The shipped model never stops a padded paper run (fewer than 14 evals in view).
    assert shipped["score"] == 0.0 and shipped["u_minus_u0"] == 0.0
    assert shipped["healthy_stopped_share"] == 0.0
    assert shipped["minus_floor"] == pytest.approx(-floor["u_minus_u0"])
    assert all(math.isfinite(shipped[f"block_{i}"]) for i in (1, 2, 3))
    text = e9.markdown_table([floor, shipped]) + e9.coverage_markdown([floor, shipped])
    assert "Δfloor" in text and floor["floor_family"] in text and "3 of 3" in text


def test_heldout_rows_are_scored_against_the_curve_oracle_over_runs() -> None:
    models = _shipped()
    from evalstop_experiments.experiments import generalisation as e9

    kw = e9.test_kwargs("trl-heldout", 20, None, False)
    assert kw["curve_split"] == "test"
    rows = e9.score_models(models, "trl-heldout", range(3), kw)
    assert [r["reference"] for r in rows] == ["CurveOracle", "CurveOracle"]
    for r in rows:
        assert r["score_lo"] <= r["score"] <= r["score_hi"]
        assert r["minus_floor_lo"] <= r["minus_floor_hi"]
    # Too few seeds to split into blocks of two.
    assert all(math.isnan(r["block_1"]) for r in rows)


def test_rescoring_replaces_a_tasks_rows_and_keeps_the_others(tmp_path, monkeypatch) -> None:
    """A rerun of some tasks reuses the trained models and rewrites only their rows."""
    models = _shipped()
    from evalstop_experiments.experiments import generalisation as e9

    monkeypatch.setitem(e9.SIZES["default"], "n_jobs", 20)
    monkeypatch.setattr(e9, "train_models", lambda *a, **k: {})
    kw = e9.test_kwargs("paper-0.12", 20, None, False)
    rows = e9.score_models(models, "paper-0.12", range(6), kw)
    other = [{**r, "test": "hard-0.05", "score": 9.0} for r in rows]
    e9.write_e9(tmp_path, other + rows)
    before = (tmp_path / "E9.csv").read_bytes()
    e9.rescore_e9(tmp_path, ["paper-0.12"], seeds=6)
    assert (tmp_path / "E9.csv").read_bytes() == before  # the same rows, in the same order
    back = e9.read_rows(tmp_path / "E9.csv")
    assert [r["test"] for r in back] == ["hard-0.05"] * 2 + ["paper-0.12"] * 2
    assert back[0]["score"] == 9.0 and back[2] == pytest.approx(rows[0], nan_ok=True)
    with pytest.raises(Exception, match="tasks"):
        e9.rescore_e9(tmp_path, ["nope-0.1"])
