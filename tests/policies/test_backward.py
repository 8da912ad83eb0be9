"""Backward-induction stoppers: the array trees equal scikit-learn's, act equals the array
decisions and the played episode, the file format is checked and trusted like an SB3 model."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

pytest.importorskip("sklearn")

from baselines import backward
from baselines.backward import (
    FEATURES,
    BackwardModel,
    BackwardStopper,
    ModelFileError,
    TrainingEpisode,
    fit_backward,
)
from baselines.floors import utilities
from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import UntrustedFileError, sha256_bytes

SMALL = {"max_iter": 8, "max_leaf_nodes": 7, "min_samples_leaf": 5}


def _kw(task: str = "hard-0.12", n_jobs: int = 30) -> dict:
    from evalstop_experiments.scoring import env_kwargs

    return env_kwargs(task, 1.0, n_jobs)


def _episodes(kw: dict, seeds) -> list[TrainingEpisode]:
    from evalstop_experiments.experiments.generalisation import lsm_episodes

    return lsm_episodes(kw, seeds)


@pytest.fixture(scope="module")
def model() -> BackwardModel:
    return fit_backward(_episodes(_kw(), range(10_000, 10_006)), params=SMALL)


def test_array_trees_predict_what_scikit_learn_predicts() -> None:
    from sklearn.ensemble import HistGradientBoostingRegressor

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, len(FEATURES)))
    x[rng.random(x.shape) < 0.1] = np.nan  # missing values take the learned branch
    y = np.nan_to_num(x[:, 0]) - 2 * np.nan_to_num(x[:, 3]) + rng.normal(size=400)
    reg = HistGradientBoostingRegressor(**SMALL, early_stopping=False, random_state=0).fit(x, y)
    meta = {
        "format": backward.FORMAT,
        "features": list(FEATURES),
        "grid": 4,
        "default_settings": {"eval_noise": 0.1, "gpu_hour_price": 1e-3},
    }
    trees = [[p[0].nodes for p in reg._predictors]]
    m = backward.pack_model(trees, [float(reg._baseline_prediction.ravel()[0])], [2], meta)
    np.testing.assert_allclose(m.predict(2, x), reg.predict(x), rtol=0, atol=1e-12)


def test_act_decides_as_the_episode_arrays_do_and_play_scores_the_offline_utility(
    model: BackwardModel,
) -> None:
    from baselines.policies import NoStop
    from evalstop_experiments.scoring import episode_arrays, job_observations, play

    kw = _kw()
    stopper = BackwardStopper(model).bind_task(kw)
    ep = episode_arrays(kw, 5)
    ends = stopper.ends(ep.arrays)
    per_call = []
    for job in job_observations(kw, 5):
        end = len(job.values)
        for i, obs in enumerate(job.obs, start=1):
            if stopper.act(obs):
                end = i
                break
        per_call.append(end)
    assert per_call == ends.tolist()
    assert (ends < ep.arrays.k).any()  # the test sees stops, not only continues
    gain = (
        utilities(ends[None, :], ep.values)[0]
        - utilities(np.full((1, len(ends)), ep.arrays.k), ep.values)[0]
    )
    played = play(kw, 5, stopper)["utility"] - play(kw, 5, NoStop())["utility"]
    assert played == pytest.approx(gain, abs=1e-9)


def test_a_saved_model_loads_only_with_its_record_and_decides_as_before(
    model: BackwardModel, tmp_path
) -> None:
    from evalstop_experiments.scoring import episode_arrays

    path = tmp_path / "m.npz"
    digest = model.save(path)
    assert (tmp_path / "m.npz.sha256").read_text().split() == [digest, "m.npz"]
    ep = episode_arrays(_kw(), 7)
    before = BackwardStopper(model).ends(ep.arrays)
    assert BackwardStopper(path).ends(ep.arrays).tolist() == before.tolist()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(UntrustedFileError):
        BackwardStopper(path)
    other = tmp_path / "bare.npz"
    other.write_bytes(path.read_bytes())
    with pytest.raises(UntrustedFileError, match="no hash record"):
        BackwardStopper(other)


def _npz(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_model_files_that_hold_pickles_or_bad_indices_are_refused(model: BackwardModel) -> None:
    arrays = model.arrays()
    pickled = {**arrays, "value": np.array([object()] * len(arrays["value"]), dtype=object)}
    with pytest.raises(ModelFileError, match="not an evalstop-gym backward"):
        BackwardModel.from_bytes(_npz(pickled))
    loop = arrays["left"].copy()
    inner = np.flatnonzero(~arrays["leaf"])[0]
    loop[inner] = inner  # a node that is its own child
    with pytest.raises(ModelFileError, match="out of range"):
        BackwardModel.from_bytes(_npz({**arrays, "left": loop}))
    # a leaf's feature is read by the walk too: out of range is refused, not an IndexError later
    far = arrays["feature"].copy()
    far[np.flatnonzero(arrays["leaf"])[0]] = 10_000
    with pytest.raises(ModelFileError, match="feature is out of range"):
        BackwardModel.from_bytes(_npz({**arrays, "feature": far}))
    # a bucket model of millions of trees (roots are cheap to compress) is refused
    from baselines.backward import MAX_BUCKET_TREES

    many = MAX_BUCKET_TREES + 1 + len(arrays["roots"])
    roots = np.concatenate([arrays["roots"], np.zeros(many - len(arrays["roots"]), np.int32)])
    mt = arrays["model_trees"].copy()
    mt[1:] += many - len(arrays["roots"])
    with pytest.raises(ModelFileError, match="trees"):
        BackwardModel.from_bytes(_npz({**arrays, "roots": roots, "model_trees": mt}))
    with pytest.raises(ModelFileError, match="not a zip"):
        BackwardModel.from_bytes(b"not a zip at all")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(40):
            zf.writestr(f"m{i}.npy", b"")
    with pytest.raises(ModelFileError, match="members"):
        BackwardModel.from_bytes(buf.getvalue())
    assert BackwardModel.from_bytes(_npz(arrays)).predict(
        int(model.buckets[0]), np.zeros((2, len(FEATURES)))
    ).shape == (2,)


def test_spec_forms_and_learned_load_a_backward_file(model: BackwardModel, tmp_path) -> None:
    from baselines.learned import Learned, from_spec

    path = tmp_path / "lsm.npz"
    model.save(path)
    assert isinstance(from_spec(f"model:{path}"), BackwardStopper)
    assert isinstance(Learned(path, label="x"), BackwardStopper)
    with pytest.raises(ConfigError, match="pretrained"):
        from_spec("pretrained:nope")


def test_settings_are_checked_and_bound_from_env_kwargs(model: BackwardModel) -> None:
    st = BackwardStopper(model).bind_task(_kw("hard-0.05"), price_factor=2.0)
    assert st.settings == {"eval_noise": 0.05, "gpu_hour_price": pytest.approx(2.4e-3)}
    with pytest.raises(ConfigError, match="eval_noise"):
        st.set_settings({"eval_noise": -1.0})
    with pytest.raises(ConfigError, match="settings"):
        st.set_settings({"hack_fraction": 0.5})


def test_a_heldout_task_tells_the_measured_noise_of_its_train_runs(model: BackwardModel) -> None:
    """What both Bayes stoppers are told there; a recorded replay keeps Bayes's floor."""
    from baselines.backward import settings_for_task
    from baselines.bayes import REAL_CURVE_NOISE
    from evalstop_gym.sim.real_curves import corpus_eval_noise
    from evalstop_gym.suite import suite_task

    kw = suite_task("trl-heldout")
    measured = corpus_eval_noise(kw["curves"], "train")
    assert measured > REAL_CURVE_NOISE
    assert settings_for_task(kw)["eval_noise"] == measured
    assert BackwardStopper(model).bind_task(kw).settings["eval_noise"] == measured
    assert settings_for_task(suite_task("trl-gao"))["eval_noise"] == REAL_CURVE_NOISE
    assert settings_for_task(_kw("hard-0.12"), 0.5) == {
        "eval_noise": 0.12,
        "gpu_hour_price": pytest.approx(0.5 * _kw("hard-0.12")["gpu_hour_price"]),
    }


def test_every_model_of_the_heldout_task_assumes_the_measured_noise() -> None:
    """Bayes by task name, by either split's env kwargs and as the suite's scoring builds
    it, and conditioned PPO: the train runs' measured eval sd, what the backward-induction
    stoppers are told there."""
    from baselines.backward import settings_for_task
    from baselines.bayes import REAL_CURVE_NOISE, BayesStopper
    from baselines.training.conditioning import NOISE_SCALE, task_settings_of
    from evalstop_experiments.scoring import references
    from evalstop_gym.suite import suite_task

    kw = suite_task("trl-heldout", split="test")
    told = settings_for_task(kw)["eval_noise"]
    assert told > REAL_CURVE_NOISE
    assert BayesStopper.for_task("trl-heldout").sigma == told
    for split in ("train", "test"):
        assert BayesStopper.from_env_kwargs(suite_task("trl-heldout", split=split)).sigma == told
    assert references(kw)[0].policy.sigma == told
    # Conditioned PPO's task observation carries the same noise.
    assert task_settings_of(kw)[0] == np.float32(told / NOISE_SCALE)
    # A whole-corpus replay is no held-out task: Bayes's floor for real curves.
    assert BayesStopper.for_task("trl-gao").sigma == REAL_CURVE_NOISE


def test_a_model_is_trained_at_the_settings_it_is_told_when_scored() -> None:
    """Training episodes carry :func:`settings_for_task`'s settings: on the held-out task's
    train runs the measured noise (not the replay's synthetic 0), elsewhere the task's own."""
    from baselines.backward import settings_for_task
    from evalstop_experiments.experiments.generalisation import heldout_kwargs

    train = heldout_kwargs("train", 2.0)
    (ep,) = _episodes(train, [10_000])
    assert ep.settings == settings_for_task(train)
    assert ep.settings["eval_noise"] > 0.05
    assert ep.settings["gpu_hour_price"] == pytest.approx(
        2 * heldout_kwargs("train")["gpu_hour_price"]
    )
    kw = _kw("grounded-0.05")
    (ep,) = _episodes(kw, [10_000])
    assert ep.settings == {"eval_noise": 0.05, "gpu_hour_price": kw["gpu_hour_price"]}


def test_shipped_general_model_matches_its_pinned_hash_and_plays() -> None:
    if not backward.PRETRAINED:
        pytest.skip("no backward-induction model shipped")
    for name, digest in backward.PRETRAINED.items():
        path = backward.PRETRAINED_DIR / f"{name}.npz"
        assert sha256_bytes(path.read_bytes()) == digest
        assert (backward.PRETRAINED_DIR / f"{name}.npz.sha256").read_text().split() == [
            digest,
            path.name,
        ]
    from baselines.learned import from_spec
    from evalstop_experiments.scoring import episode_arrays

    st = from_spec("pretrained:general")
    assert isinstance(st, BackwardStopper)
    kw = _kw("paper-0.12")
    st.bind_task(kw)
    ends = st.ends(episode_arrays(kw, 1).arrays)
    assert ends.min() >= 1 and ends.max() <= 10


def test_train_cli_writes_a_model_the_spec_loads(tmp_path, capsys) -> None:
    from evalstop_cli.main import main

    out = tmp_path / "cli.npz"
    assert main(["train", "--algo", "lsm", "--task", "paper-0.12", "--episodes", "2",
                 "--out", str(out)]) == 0  # fmt: skip
    assert BackwardStopper(out).meta["record"]["task"] == "paper-0.12"
    assert main(["train", "--algo", "lsm", "--out", str(out)]) != 0
    assert "task=None" in capsys.readouterr().err


def test_the_smoothed_features_are_trend_averages_and_old_boundary_models_still_play(
    tmp_path,
) -> None:
    from evalstop_experiments.scoring import episode_arrays

    rng = np.random.default_rng(1)
    e = rng.normal(size=(3, 12))
    x = backward.feature_matrix(e, e, np.zeros(3, int), 0.6, np.zeros(3), 0.1, 1e-3, smoothed=True)
    names = backward.FEATURE_SETS["smoothed"]
    assert x.shape == (3, len(names))
    col = dict(zip(names, x.T, strict=True))
    np.testing.assert_allclose(col["ols6_z"], np.polyfit(np.arange(6), e[:, -6:].T, 1)[0] / 0.1)
    np.testing.assert_allclose(
        col["mean5_prev5_z"], (e[:, -5:].mean(1) - e[:, -10:-5].mean(1)) / 0.1
    )
    np.testing.assert_allclose(col["mean_level"], e.mean(1))
    assert np.isnan(
        backward.feature_matrix(
            e[:, :2], e[:, :2], np.zeros(3, int), 0.1, np.zeros(3), 0.1, 0, True
        )[:, len(FEATURES)]
    ).all()  # no slope from two evals
    # A model of the boundary features alone (the earlier files) loads and decides the same.
    old = fit_backward(_episodes(_kw(), range(10_000, 10_003)), params=SMALL, features="boundary")
    assert not old.smoothed and old.meta["features"] == list(FEATURES)
    old.save(tmp_path / "old.npz")
    ep = episode_arrays(_kw(), 7)
    assert (
        BackwardStopper(tmp_path / "old.npz").ends(ep.arrays).tolist()
        == BackwardStopper(old).ends(ep.arrays).tolist()
    )
    with pytest.raises(ConfigError, match="features"):
        fit_backward(_episodes(_kw(), [10_000]), features="raw")


def test_general_episodes_keep_a_subset_of_each_episodes_jobs_in_order() -> None:
    from evalstop_experiments.experiments.generalisation import _some_jobs

    (ep,) = _episodes(_kw(n_jobs=30), [10_000])
    sub = _some_jobs(ep, 10, 20_000)
    assert sub.values.shape == (10, ep.arrays.k) and sub.arrays.evals.shape == (10, ep.arrays.k)
    rows = [int(np.flatnonzero((ep.values == v).all(1))[0]) for v in sub.values]
    assert rows == sorted(rows)
    np.testing.assert_array_equal(sub.arrays.evals, ep.arrays.evals[rows])
    assert _some_jobs(ep, 10, 20_000).values.tolist() == sub.values.tolist()  # seeded
    assert _some_jobs(ep, 100, 20_000) is ep


def test_a_stop_margin_only_delays_stops(model: BackwardModel) -> None:
    """``ends(arrays, margin)`` stops below ``-margin``: 0 is ``act``'s rule, a larger
    margin ends every job at or after where a smaller one does."""
    from evalstop_experiments.scoring import episode_arrays

    kw = _kw()
    st = BackwardStopper(model).bind_task(kw)
    arrays = episode_arrays(kw, 5).arrays
    plain = st.ends(arrays)
    assert st.ends(arrays, 0.0).tolist() == plain.tolist()
    later, sooner = st.ends(arrays, 1e-3), st.ends(arrays, -1e-3)
    assert (later >= plain).all() and (plain >= sooner).all()
    assert (st.ends(arrays, 1e9) == arrays.evals.shape[1]).all()  # never stops
