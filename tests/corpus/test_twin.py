"""The twin: a model of a corpus's train runs, its draws, and the shipped english_twin."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalstop_gym.corpus.analysis import corpus_curves, label_hacking
from evalstop_gym.corpus.format import CurveTrace
from evalstop_gym.corpus.packaged import load_corpus, sidecar
from evalstop_gym.corpus.split import split_runs
from evalstop_gym.corpus.twin import NOISE_MULTIPLE, draw_twin, fit_twin
from evalstop_gym.errors import ConfigError
from evalstop_gym.suite import suite_task


def _run(i: int, label: bool, rng: np.random.Generator, sd: float = 0.03) -> CurveTrace:
    p = np.linspace(0, 1, 11)
    gain = 0.3 + 0.1 * rng.random()
    gold = gain * (np.sin(np.pi * p * 0.9) if label else p) + 0.01 * rng.standard_normal(11)
    loss = 1.0 - 0.5 * p + 0.01 * rng.standard_normal(11)
    return CurveTrace(
        run_id=f"r{i}-s{i}",
        step=np.arange(11) * 2,
        eval=gold,
        loss=loss,
        gold=gold,
        label=label,
        meta={
            "eval_noise_sd": sd * (1 + 0.1 * rng.random()),
            "eval_batch": 32,
            "gold_batch": 128,
            "trainer": "grpo" if i % 2 else "rloo",
        },
    )


@pytest.fixture(scope="module")
def runs() -> list[CurveTrace]:
    rng = np.random.default_rng(0)
    return [_run(i, i % 3 == 0, rng) for i in range(60)]


def test_draws_are_deterministic_per_seed_and_new_runs(runs: list[CurveTrace]) -> None:
    model = fit_twin(runs)
    a, b, c = draw_twin(model, 50, 1), draw_twin(model, 50, 1), draw_twin(model, 50, 2)
    assert all(
        np.array_equal(x.gold, y.gold) and np.array_equal(x.eval, y.eval) for x, y in zip(a, b)
    )
    assert not np.array_equal(a[0].gold, c[0].gold)
    real = {tuple(np.round(t.gold, 12)) for t in runs}
    assert not any(tuple(np.round(t.gold, 12)) in real for t in a)  # never a recorded run


def test_a_draw_keeps_its_classs_mean_and_labels_by_the_rule(runs: list[CurveTrace]) -> None:
    model = fit_twin(runs)
    healthy = next(c for c in model.classes if not c.label)
    draws = draw_twin(model, 6000, 3, bandwidth=0.5)
    same = [t for t in draws if t.meta["class_label"] is False]
    loss = np.mean([t.loss for t in same], axis=0)
    m = len(model.steps)
    np.testing.assert_allclose(loss, healthy.mean[m + 1 : 2 * m + 1], atol=0.01)
    for t in draws[:200]:
        se = t.meta["gold_noise_sd"]
        assert t.label == label_hacking(t.gold, min_abs_drop=NOISE_MULTIPLE * se)
    # the class weights are the fitted share of each label
    share = np.mean([t.meta["class_label"] for t in draws])
    assert abs(share - np.mean([t.label for t in runs])) < 0.03


def test_eval_batch_scales_the_noise_as_a_mean_of_that_many(runs: list[CurveTrace]) -> None:
    model = fit_twin(runs)
    a = draw_twin(model, 20, 5)
    b = draw_twin(model, 20, 5, eval_batch=128)
    for x, y in zip(a, b):
        assert y.meta["eval_noise_sd"] == pytest.approx(
            x.meta["eval_noise_sd"] * math.sqrt(32 / 128)
        )
        np.testing.assert_array_equal(x.gold, y.gold)  # the recipe changes the eval, not the run


def test_grouping_by_a_field_and_bad_input_named(runs: list[CurveTrace]) -> None:
    assert len(fit_twin(runs, by="trainer").classes) == 4
    with pytest.raises(ConfigError, match="traces"):
        fit_twin([])
    with pytest.raises(ConfigError, match="at least 4 runs"):
        fit_twin(runs[:9], by="trainer")
    bad = CurveTrace(
        "x", runs[0].step, runs[0].eval, runs[0].loss, gold=runs[0].gold, label=True, meta={}
    )
    with pytest.raises(ConfigError, match="eval_noise_sd"):
        fit_twin([*runs, bad])
    model = fit_twin(runs)
    for kwargs in (
        {"n_runs": 0},
        {"n_runs": 5, "bandwidth": 0.0},
        {"n_runs": 5, "bandwidth": 1.5},
        {"n_runs": 5, "eval_batch": 0},
    ):
        with pytest.raises(ConfigError):
            draw_twin(model, **kwargs)


def test_the_shipped_twin_is_fitted_on_train_runs_only() -> None:
    twin = load_corpus("english_twin")
    real = load_corpus("english_rlhf")
    test = set(split_runs(real).test)
    assert len(twin) == sidecar("english_twin")["runs"] == 1000
    assert sidecar("english_twin")["criterion_passed"] is True
    assert all(t.meta["twin_of"] == "english_rlhf:train" for t in twin)
    # a twin run is none of the real runs, and the test runs' gold never reached the fit
    golds = {tuple(np.round(t.gold, 9)) for t in real}
    assert not any(tuple(np.round(t.gold, 9)) in golds for t in twin)
    kw, ref = suite_task("english-twin"), suite_task("english-heldout")
    assert {k: v for k, v in kw.items() if k != "curves"} == {
        k: v for k, v in ref.items() if k != "curves"
    }
    assert test  # the split exists


@pytest.mark.slow
def test_the_shipped_twin_regenerates(tmp_path) -> None:
    from evalstop_experiments.twin_fit import ship_twin

    path, fit = ship_twin(tmp_path)
    assert fit.bandwidth == sidecar("english_twin")["bandwidth"]
    mine = {t.run_id: t for t in load_corpus("english_twin")}
    from evalstop_gym.corpus.format import read_traces

    for t in read_traces(path):
        np.testing.assert_allclose(t.gold, mine[t.run_id].gold, rtol=1e-9, atol=1e-12)
        assert t.label == mine[t.run_id].label


def test_the_out_of_sample_corpus_is_new_runs_of_the_changed_recipe() -> None:
    oos, fitted = load_corpus("english_rlhf_b64"), load_corpus("english_rlhf")
    assert len(oos) == sidecar("english_rlhf_b64")["runs"] == 72
    assert {t.meta["eval_batch"] for t in oos} == {64} and {
        t.meta["eval_batch"] for t in fitted
    } == {32}
    assert not {t.meta["seed"] for t in oos} & {t.meta["seed"] for t in fitted}
    assert {t.meta["trainer"] for t in oos} == {"grpo", "rloo", "online_dpo"}

    # the eval noise of a 64-sample mean: about 1/sqrt(2) of the 32-sample one
    def med(ts):
        return float(np.median([t.meta["eval_noise_sd"] for t in ts if t.meta["eval_noise_sd"]]))

    assert 0.6 < med(oos) / med(fitted) < 0.8


@pytest.mark.parametrize("name", ["english_rlhf_s2", "english_rlhf_s3"])
def test_the_later_corpora_are_the_fitted_recipe_on_new_seeds(name: str) -> None:
    new, fitted = load_corpus(name), load_corpus("english_rlhf")
    assert len(new) == sidecar(name)["runs"] == 72
    assert {t.meta["eval_batch"] for t in new} == {32}
    seeds = {t.meta["seed"] for t in new}
    others = {"english_rlhf", "english_rlhf_b64", "english_rlhf_s2", "english_rlhf_s3"} - {name}
    for other in sorted(others):  # no run seed shared with any other English corpus
        assert not seeds & {t.meta["seed"] for t in load_corpus(other)}
    assert {t.meta["trainer"] for t in new} == {"grpo", "rloo", "online_dpo"}
    recipe = ("steps", "eval_every", "lr", "prompts_per_step", "num_generations", "gold_batch")
    assert {tuple(t.meta[k] for k in recipe) for t in new} == {
        tuple(t.meta[k] for k in recipe) for t in fitted
    }


def _at_batch(t: CurveTrace, batch: int) -> CurveTrace:
    """``t`` as if measured with an eval of ``batch`` completions (its sd rescaled)."""
    sd = t.meta["eval_noise_sd"] * math.sqrt(t.meta["eval_batch"] / batch)
    return CurveTrace(
        t.run_id + "-b",
        t.step,
        t.eval,
        t.loss,
        gold=t.gold,
        label=t.label,
        meta={**t.meta, "eval_batch": batch, "eval_noise_sd": sd},
    )


def test_runs_of_several_eval_batches_fit_at_one_named_batch(runs: list[CurveTrace]) -> None:
    mixed = [_at_batch(t, 64) if i % 2 else t for i, t in enumerate(runs)]
    with pytest.raises(ConfigError, match="eval batch 64"):
        fit_twin(mixed)
    pooled, plain = fit_twin(mixed, eval_batch=32), fit_twin(runs)
    assert pooled.eval_batch == 32
    for a, b in zip(pooled.classes, plain.classes, strict=True):
        np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.deviations, b.deviations, rtol=1e-9, atol=1e-12)
    # fitted at 64, the same runs' sds are each a sqrt(2) smaller
    at64 = fit_twin(runs, eval_batch=64)
    assert at64.classes[0].mean[-1] == pytest.approx(plain.classes[0].mean[-1] - math.log(2) / 2)
    gold = CurveTrace(
        "g",
        runs[0].step,
        runs[0].eval,
        runs[0].loss,
        gold=runs[0].gold,
        label=True,
        meta={**runs[0].meta, "gold_batch": 256},
    )
    with pytest.raises(ConfigError, match="gold batch"):
        fit_twin([*runs, gold])
    for bad in (0, 2.5, True):
        with pytest.raises(ConfigError, match="eval_batch"):
            fit_twin(runs, eval_batch=bad)  # type: ignore[arg-type]


def test_a_group_mix_sets_each_groups_share_and_keeps_its_hack_share(
    runs: list[CurveTrace],
) -> None:
    model = fit_twin(runs, by="trainer")
    assert model.by == "trainer" and set(model.groups) == {"grpo", "rloo"}
    fitted = draw_twin(model, 4000, 7)
    mixed = draw_twin(model, 4000, 7, group_mix={"grpo": 3, "rloo": 1})
    assert {t.meta["trainer"] for t in mixed} == {"grpo", "rloo"}
    assert abs(np.mean([t.meta["trainer"] == "grpo" for t in mixed]) - 0.75) < 0.03
    assert abs(np.mean([t.meta["trainer"] == "grpo" for t in fitted]) - 0.5) < 0.03
    for g in ("grpo", "rloo"):  # each group's hack share is its fitted one
        want = np.mean([bool(t.label) for t in runs if t.meta["trainer"] == g])
        got = np.mean([t.meta["class_label"] for t in mixed if t.meta["trainer"] == g])
        assert abs(got - want) < 0.05
    only = draw_twin(model, 200, 7, group_mix={"rloo": 1.0})
    assert {t.meta["trainer"] for t in only} == {"rloo"}
    assert "trainer" not in draw_twin(fit_twin(runs), 5, 0)[0].meta  # no group, no field
    for bad in ({"ppo": 1.0}, {"grpo": -1.0}, {"grpo": 0.0}, {"grpo": float("nan")}, {}, [1]):
        with pytest.raises(ConfigError, match="group_mix"):
            draw_twin(model, 5, 0, group_mix=bad)  # type: ignore[arg-type]


def test_the_shipped_pooled_twin_never_read_the_test_half_and_regenerates(tmp_path) -> None:
    from evalstop_experiments.twin_pool import POOL_CORPUS, POOL_SOURCES, fit_pool_twin, write_pool

    pool, real = load_corpus(POOL_CORPUS), load_corpus("english_rlhf")
    meta = sidecar(POOL_CORPUS)
    assert len(pool) == meta["runs"] == 1000 and meta["criterion_passed"] is True
    assert meta["form"] == "rise"
    assert meta["fitted_on"] == "english_rlhf:train+english_rlhf_b64+english_rlhf_s2"
    assert [c for c, _ in POOL_SOURCES] == ["english_rlhf", "english_rlhf_b64", "english_rlhf_s2"]
    assert {t.meta["trainer"] for t in pool} == {"grpo", "online_dpo", "rloo"}
    fit = fit_pool_twin()
    assert sum(c.deviations.shape[0] for c in fit.model.classes) == 108 + 72 + 72
    golds = {tuple(np.round(t.gold, 9)) for t in real}
    assert not any(tuple(np.round(t.gold, 9)) in golds for t in pool)
    from evalstop_experiments.twin_pool import corpus_side

    test = set(split_runs(real).test)
    assert not test & {t.run_id for t in corpus_side("english_rlhf", "train")}
    again = write_pool(tmp_path / f"{POOL_CORPUS}.jsonl", fit)
    from evalstop_gym.corpus.format import read_traces

    for a, b in zip(read_traces(again), pool, strict=True):
        np.testing.assert_allclose(a.gold, b.gold, rtol=1e-9, atol=1e-12)
        assert a.label == b.label and a.meta["trainer"] == b.meta["trainer"]
    assert suite_task("english-twin-pool")["curves"].endswith(f"{POOL_CORPUS}.jsonl")


def test_the_rise_form_keeps_the_gold_noise_at_its_measured_scale(runs: list[CurveTrace]) -> None:
    from evalstop_experiments.twin_fit import roughness

    small = [  # half the runs gain little: their shape's noise is their gold noise / gain
        CurveTrace(
            t.run_id + "-small",
            t.step,
            t.eval,
            t.loss,
            gold=t.gold[0] + 0.1 * (t.gold - t.gold[0]) + 0.01 * np.sin(np.arange(11) * 2.0),
            label=t.label,
            meta=t.meta,
        )
        for t in runs
    ]
    both = [*runs, *small]
    rise, shape = fit_twin(both, form="rise"), fit_twin(both)
    assert rise.form == "rise" and shape.form == "shape"
    assert all(np.all(c.mean[1] == 0.0) for c in rise.classes)  # log gain 0: gold = g0 + rise
    t0 = both[0]
    m = len(rise.steps)
    v = fit_twin([t0] * 4, form="rise").classes[0].mean
    np.testing.assert_allclose(v[2 : m + 1], t0.gold[1:] - t0.gold[0])
    real = roughness(*corpus_curves(both))["gold_roughness"]
    r = roughness(*corpus_curves(draw_twin(rise, 2000, 0, bandwidth=0.25)))["gold_roughness"]
    s_ = roughness(*corpus_curves(draw_twin(shape, 2000, 0, bandwidth=0.25)))["gold_roughness"]
    assert abs(r - real) < abs(s_ - real)
    with pytest.raises(ConfigError, match="form"):
        fit_twin(runs, form="log")


def test_roughness_on_a_hand_computed_pair() -> None:
    from evalstop_experiments.twin_fit import roughness

    def t(gold: list[float]) -> CurveTrace:
        g = np.array(gold)
        return CurveTrace("x", np.arange(len(g)), g, g, gold=g, label=False, meta={})

    # second differences |[-2, 2]| -> 2 and |[0, 0]| -> 0: median 1; falling steps 1 of 6
    got = roughness(*corpus_curves([t([0.0, 1.0, 0.0, 1.0]), t([0.0, 1.0, 2.0, 3.0])]))
    assert got == {"gold_roughness": 1.0, "gold_decline_share": pytest.approx(1 / 6)}
