"""The routed stopper: its classifier trees equal scikit-learn's, it pools each job's
evidence once and forgets it on reset, its played utility is the harness's, its file
is checked and trusted like every model file."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

from baselines import routed
from baselines.backward import ModelFileError, TrainingEpisode
from baselines.routed import RoutedModel, RoutedStopper, evidence_index, fit_routed
from evalstop_gym.errors import ConfigError
from evalstop_gym.fileio import UntrustedFileError

SMALL = {"max_iter": 8, "max_leaf_nodes": 7, "min_samples_leaf": 5}
NAMES = ("hard", "paper")


def _kw(task: str, n_jobs: int = 24) -> dict:
    from evalstop_experiments.scoring import env_kwargs

    return env_kwargs(task, 1.0, n_jobs)


def _data() -> tuple[list[TrainingEpisode], list[int]]:
    from evalstop_experiments.experiments.generalisation import lsm_episodes

    hard = lsm_episodes(_kw("hard-0.12"), range(10_000, 10_004))
    paper = lsm_episodes(_kw("paper-0.12"), range(10_000, 10_004))
    return hard + paper, [0] * len(hard) + [1] * len(paper)


@pytest.fixture(scope="module")
def model() -> RoutedModel:
    data, regimes = _data()
    return fit_routed(data, regimes, NAMES, params=SMALL, classifier_params=SMALL)


def test_the_classifier_trees_give_scikit_learns_probabilities(model: RoutedModel) -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    from baselines.backward import bucket_of, features_at

    data, regimes = _data()
    grid, b = model.grid, 6
    xs, ys = [], []
    for ep, r in zip(data, regimes, strict=True):
        for i in range(1, ep.arrays.k):
            if bucket_of(i, ep.arrays.k, grid) == b:
                rows = np.arange(ep.values.shape[0])
                xs.append(features_at(ep.arrays, rows, i, ep.settings, model.smoothed))
                ys.append(np.full(len(rows), r))
    x, y = np.concatenate(xs), np.concatenate(ys)
    seen = x.copy()
    seen[:, np.isnan(seen).all(axis=0)] = 0.0
    seen[:, model._masked] = 0.0
    conf = {**routed.CLASSIFIER_PARAMS, **SMALL}
    c = HistGradientBoostingClassifier(**conf).fit(seen, y)  # two regimes: the binary fit
    want = np.maximum(c.predict_proba(seen), routed.PROB_FLOOR)
    np.testing.assert_allclose(np.exp(model.log_probs(b, x)), want, rtol=0, atol=1e-12)
    # The task settings are never read: changing them changes no probability.
    other = x.copy()
    other[:, model._masked] += 7.0
    np.testing.assert_array_equal(model.log_probs(b, other), model.log_probs(b, x))


def test_the_joint_walk_gives_each_models_own_prediction_bit_for_bit(model: RoutedModel) -> None:
    # One pass over every model's trees (the routed decision's fast path) must give what
    # each model's own predict gives, exactly: decisions stay those of the models.
    rng = np.random.default_rng(5)
    f = len(model.experts[0].meta["features"])
    r = len(model.experts)
    for b in range(model.grid + 2):  # every bucket, and some no model was fitted for
        x = rng.normal(scale=3.0, size=(9, f))
        x[rng.random(x.shape) < 0.15] = np.nan
        x[0] = np.nan  # a row of missing values only
        raw, gains = model.predictions(b, x)
        masked = x.copy()
        masked[:, model._masked] = 0.0
        for m in range(r):
            e, c = model.experts[m], model.scores[m]
            want = e.predict(b, x) if e.has_bucket(b) else np.full(len(x), np.nan)
            np.testing.assert_array_equal(gains[:, m], want)
            want = c.predict(b, masked) if c.has_bucket(b) else np.full(len(x), -np.inf)
            np.testing.assert_array_equal(raw[:, m], want)
    # and the averaged gain is the weighted mean of the experts fitted there
    b = next(b for b in range(model.grid) if all(e.has_bucket(b) for e in model.experts))
    x = rng.normal(size=(3, f))
    w = np.array([[0.25, 0.75], [1.0, 0.0], [1e-9, 1.0]])
    g = np.stack([e.predict(b, x) for e in model.experts], axis=1)
    want = [0.25 * g[0, 0] + 0.75 * g[0, 1], g[1, 0], g[2, 1]]
    np.testing.assert_allclose(model.gain(b, x, w), want, rtol=1e-12)


def test_each_job_adds_its_evidence_once_and_reset_forgets_it(model: RoutedModel) -> None:
    from baselines.evaluate import play_episode

    kw = _kw("paper-0.12")
    st = RoutedStopper(model).bind_task(kw)
    row, rec = play_episode(st, 3, kw)
    k = rec.ckpt_done.max()
    share = model.meta["share"]
    reached = int((np.asarray(rec.ckpt_done) >= evidence_index(int(k), share)).sum())
    assert st.jobs_seen == reached > 0
    assert st.posterior().argmax() == NAMES.index("paper")
    st.reset()
    assert st.jobs_seen == 0
    np.testing.assert_allclose(st.posterior(), [0.5, 0.5])
    # Played twice on one seed: the same stops (reset at each episode's start).
    again = play_episode(st, 3, kw)[1]
    assert again.ckpt_done.tolist() == rec.ckpt_done.tolist()


def test_the_lone_stopper_routes_each_job_by_its_own_evidence(model: RoutedModel) -> None:
    """Unpooled: the pool stays empty, and every decision is the pooled stopper's with the
    pool forgotten just before it (the prior and the job's own evidence)."""
    from baselines.evaluate import play_episode

    class Forgetful(RoutedStopper):
        def _stops(self, i: int, k: int, bucket: int, x: np.ndarray) -> bool:
            self.reset()
            return super()._stops(i, k, bucket, x)

    for task in ("paper-0.12", "hard-0.12"):
        kw = _kw(task)
        lone = routed.LoneRoutedStopper(model).bind_task(kw)
        _, rec = play_episode(lone, 3, kw)
        assert lone.jobs_seen == 0 and not lone.evidence.any()
        _, want = play_episode(Forgetful(model).bind_task(kw), 3, kw)
        assert rec.ckpt_done.tolist() == want.ckpt_done.tolist()
        assert rec.ckpt_done.min() < rec.ckpt_done.max()  # it stops some jobs, not all


def test_the_harness_plays_it_and_scores_the_played_utility(model: RoutedModel) -> None:
    from baselines.evaluate import play_episode
    from baselines.floors import utilities
    from evalstop_experiments.scoring import episode_arrays

    kw = _kw("hard-0.12")
    st = RoutedStopper(model).bind_task(kw)
    ep = episode_arrays(kw, 4)
    with pytest.raises(TypeError, match="time order"):
        st.ends(ep.arrays)
    row, rec = play_episode(st, 4, kw)
    row0, _ = play_episode(__import__("baselines.policies").policies.NoStop(), 4, kw)
    ends = np.asarray(rec.ckpt_done)
    assert (ends < ep.arrays.k).any()
    gain = (
        utilities(ends[None, :], ep.values)[0]
        - utilities(np.full((1, len(ends)), ep.arrays.k), ep.values)[0]
    )
    assert row["utility"] - row0["utility"] == pytest.approx(gain, abs=1e-9)


def test_a_saved_model_loads_only_with_its_record_and_refuses_bad_parts(
    model: RoutedModel, tmp_path
) -> None:
    from baselines.evaluate import play_episode

    path = tmp_path / "r.npz"
    model.save(path)
    kw = _kw("hard-0.12")
    a = play_episode(RoutedStopper(model).bind_task(kw), 2, kw)[1].ckpt_done
    b = play_episode(RoutedStopper(path).bind_task(kw), 2, kw)[1].ckpt_done
    assert a.tolist() == b.tolist()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(UntrustedFileError):
        RoutedStopper(path)

    with np.load(io.BytesIO(model.to_bytes()), allow_pickle=False) as z:
        good = {k: z[k] for k in z.files}

    def refused(members: dict, match: str) -> None:
        buf = io.BytesIO()
        np.savez(buf, **members)
        with pytest.raises(ModelFileError, match=match):
            RoutedModel.from_bytes(buf.getvalue())

    refused({k: v for k, v in good.items() if k != "score_1"}, "score_1")
    refused({**good, "score_1": np.zeros(3)}, "not bytes")
    refused({**good, "score_1": np.frombuffer(b"not a zip", np.uint8)}, "score_1")
    import json

    meta = json.loads(good[routed.ROUTED_META].tobytes())
    for field, value, match in (
        ("prior", [1.0, -1.0], "prior"),
        ("regimes", ["hard", "hard"], "regimes"),
        ("share", 1.5, "share"),
        ("classifier_masked", ["__class__"], "classifier_masked"),
    ):
        bad = json.dumps({**meta, field: value}).encode()
        refused({**good, routed.ROUTED_META: np.frombuffer(bad, np.uint8)}, match)


def test_fit_refuses_regimes_that_do_not_fit_the_episodes() -> None:
    data, regimes = _data()
    with pytest.raises(ConfigError, match="regimes"):
        fit_routed(data, regimes[:-1], NAMES)
    with pytest.raises(ConfigError, match="regimes"):
        fit_routed(data, [0] * len(data), NAMES)  # 'paper' has no episode
    with pytest.raises(ConfigError, match="regimes"):
        fit_routed(data, [2] * len(data), NAMES)
    with pytest.raises(ConfigError, match="share"):
        fit_routed(data, regimes, NAMES, share=1.0)


def test_a_backward_models_name_is_refused_as_a_routed_pretrained_model() -> None:
    with pytest.raises(ConfigError, match="pretrained"):
        RoutedStopper.pretrained("general")  # the backward model's name, not a routed one


def test_the_shipped_routed_model_is_pinned_and_loads_through_every_entry(tmp_path) -> None:
    from baselines.backward import PRETRAINED_DIR, BackwardStopper
    from baselines.learned import Learned, from_spec, load_model, pretrained_sha256
    from evalstop_gym.fileio import sha256_bytes

    (name,) = RoutedStopper.shipped
    path = PRETRAINED_DIR / f"{name}.npz"
    digest = RoutedStopper.shipped[name]
    assert sha256_bytes(path.read_bytes()) == digest == pretrained_sha256(name)
    assert Path(f"{path}.sha256").read_text().split() == [digest, path.name]
    for st in (from_spec(f"pretrained:{name}"), load_model(path), Learned(path),
               RoutedStopper.pretrained()):  # fmt: skip
        assert type(st) is RoutedStopper and st.stateful
        assert st.model.regimes == ["hard", "realistic", "paper", "grounded"]
    # a backward file still loads as a backward stopper; the routed class refuses its name
    assert type(load_model(PRETRAINED_DIR / "general.npz")) is BackwardStopper
    # the pinned hash guards the shipped bytes: a changed copy with a new record is refused
    bad = tmp_path / f"{name}.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    bad.write_bytes(bytes(data))
    with pytest.raises(UntrustedFileError):
        routed.load_stopper(bad, sha256=digest)


def test_the_benchmark_plays_the_shipped_routed_model(capsys) -> None:
    from evalstop_cli.main import main

    argv = ["benchmark", "--seeds", "1", "--workers", "1", "--n-jobs", "8"]
    assert main([*argv, "--calibration", "paper", "--policy", "pretrained:routed"]) == 0
    assert "pretrained:routed" in capsys.readouterr().out


def test_a_live_run_is_routed_by_its_own_evidence_and_each_run_starts_afresh() -> None:
    from baselines.online import OnlineStopper
    from evalstop_gym.suite import suite_task

    st = RoutedStopper.pretrained().bind_task(suite_task("hard-0.12"))
    curve = [0.2 + 0.05 * i if i < 8 else 0.6 - 0.06 * (i - 8) for i in range(20)]
    stops = []
    for _ in range(2):  # a second run with the same policy object: the pool starts empty
        live = OnlineStopper(st, len(curve))
        assert st.jobs_seen == 0
        for i, v in enumerate(curve):
            if live.observe(v, loss=1.0 - 0.02 * i):
                break
        stops.append((live.stop_step, live.best_index, st.jobs_seen))
    assert stops[0] == stops[1]
    stop, best, seen = stops[0]
    assert best == 8 and stop is not None and best < stop < len(curve) and seen == 1


def test_the_loader_tells_the_formats_by_their_metadata_member(
    model: RoutedModel, tmp_path
) -> None:
    import zipfile

    from baselines.backward import BackwardStopper

    # np.load names a member with or without ".npy": a routed file of either spelling routes
    src = io.BytesIO(model.to_bytes())
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            name = (
                info.filename.removesuffix(".npy")
                if "routed_json" in info.filename
                else info.filename
            )
            zout.writestr(name, zin.read(info))
    path = tmp_path / "bare-meta.npz"
    path.write_bytes(out.getvalue())
    assert type(routed.load_stopper(path, trust=True)) is RoutedStopper
    # a backward file stays a backward stopper, whatever else it holds
    expert = tmp_path / "expert.npz"
    expert.write_bytes(model.experts[0].to_bytes())
    assert type(routed.load_stopper(expert, trust=True)) is BackwardStopper


@pytest.mark.parametrize("lone", [False, True])
def test_primed_predictions_are_the_one_job_ones_and_play_the_same_episode(
    model: RoutedModel, lone: bool
) -> None:
    from baselines.backward import bucket_of, feature_matrix
    from baselines.evaluate import play_episode
    from evalstop_experiments.scoring import episode_arrays

    cls = routed.LoneRoutedStopper if lone else RoutedStopper
    for task, seed in (("hard-0.12", 4), ("paper-0.12", 5), ("trl-gao", 6)):
        kw = _kw(task)
        st = cls(model).bind_task(kw)
        row, rec = play_episode(st, seed, kw)
        evidence, seen = st.evidence.copy(), st.jobs_seen
        st.primed(episode_arrays(kw, seed).arrays)
        assert st._primed
        # Every primed row is the one-job walk's, bit for bit.
        for (jt, eb, lb, progress, declines), (i, k, raw, gains) in st._primed.items():
            x = feature_matrix(
                np.frombuffer(eb)[None, :],
                np.frombuffer(lb)[None, :],
                np.array([jt]),
                progress,
                np.array([declines]),
                st.settings["eval_noise"],
                st.settings["gpu_hour_price"],
                st.model.smoothed,
            )
            one_raw, one_gains = st.model.predictions(bucket_of(i, k, st.model.grid), x)
            assert one_raw.tobytes() == raw.tobytes() and one_gains.tobytes() == gains.tobytes()

        # Every decision of the played episode reads a primed row: none walks the trees.
        def walk(*args: object) -> bool:
            raise AssertionError("a decision missed the primed rows")

        st._stops = walk  # type: ignore[method-assign]
        row2, rec2 = play_episode(st, seed, kw)
        del st._stops
        assert st.jobs_seen == seen
        np.testing.assert_array_equal(st.evidence, evidence)
        np.testing.assert_array_equal(rec2.ckpt_done, rec.ckpt_done)
        assert row2["utility"] == row["utility"]
        # New settings forget the primed rows.
        st.set_settings({"eval_noise": 0.1})
        assert not st._primed
