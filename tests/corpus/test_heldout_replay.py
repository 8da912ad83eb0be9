"""The held-out replay of a corpus: the common map, the split, fresh noise, jitter and warp."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401  (registers the ids)
from evalstop_gym.corpus import read_traces, write_traces
from evalstop_gym.corpus.packaged import TRL_CORPUS, corpus_path
from evalstop_gym.corpus.split import split_runs
from evalstop_gym.errors import ConfigError
from evalstop_gym.sim.real_curves import (
    BASE,
    GAIN,
    CorpusMap,
    corpus_eval_noise,
    corpus_map,
    job_runs,
    run_noise_sd,
)
from evalstop_gym.sim.workloads import RLHF
from evalstop_gym.suite import HELDOUT_TASKS, registered_tasks, suite_task, task_env_id

CORPUS = str(corpus_path(TRL_CORPUS))
PLAIN = {"curve_warp": 0.0, "curve_jitter": 0.0}


def _sim(kw: dict, seed: int = 0, n_jobs: int = 60):
    env = gym.make("EvalStop-v0", disable_env_checker=True, **{**kw, "n_jobs": n_jobs})
    env.reset(seed=seed)
    sim = env.unwrapped.sim  # type: ignore[attr-defined]
    env.close()
    return sim


def test_the_split_of_the_shipped_corpus_by_label() -> None:
    traces = read_traces(CORPUS)
    split = split_runs(traces)
    label = {t.run_id: bool(t.label) for t in traces}
    counts = {side: sum(label[r] for r in getattr(split, side)) for side in ("train", "test")}
    assert (len(split.train), len(split.test)) == (24, 24)
    assert counts == {"train": 9, "test": 10}  # hacking runs; the rest are healthy


@pytest.mark.parametrize("side", ["train", "test"])
def test_a_side_replays_only_its_runs(side: str) -> None:
    split = split_runs(read_traces(CORPUS))
    want = set(getattr(split, side))
    seen: set[str] = set()
    for seed in range(3):
        sim = _sim(suite_task("trl-heldout", split=side), seed)
        seen |= {r for r in job_runs(sim.curves) if r is not None}
    assert seen and seen <= want


def test_the_heldout_task_defaults_to_its_test_runs_and_has_an_id() -> None:
    kw = suite_task("trl-heldout")
    assert kw["curve_split"] == "test" and kw["curve_scale"] == "corpus"
    assert kw["curve_noise"] == "fresh" and kw["curves"] == CORPUS
    assert suite_task("trl-heldout", split="train")["curve_split"] == "train"
    assert "trl-heldout" in registered_tasks() and "trl-heldout" in HELDOUT_TASKS
    assert gym.spec(task_env_id("trl-heldout")).kwargs == kw
    assert "curve_split" not in suite_task("trl-gao")  # the published task is unchanged


def test_bad_split_and_curve_options_are_refused_naming_the_input() -> None:
    with pytest.raises(ConfigError, match="split"):
        suite_task("trl-heldout", split="validation")
    with pytest.raises(ConfigError, match="split"):
        suite_task("hard-0.12", split="train")
    with pytest.raises(ConfigError, match="curve_scale"):
        gym.make("EvalStop-v0", curves=CORPUS, curve_scale="peak")
    with pytest.raises(ConfigError, match="curve_noise"):
        gym.make("EvalStop-v0", curve_noise="fresh")  # no corpus
    with pytest.raises(ConfigError, match="curve_warp"):
        gym.make("EvalStop-v0", curves=CORPUS, curve_warp=-1.0)


def test_one_map_for_every_run_from_the_corpus_as_a_whole() -> None:
    """Every run's gold is mapped by the same affine map: the medians land on 0.3 and 0.6."""
    cmap = corpus_map(CORPUS)
    golds = [t.gold for t in read_traces(CORPUS)]
    starts = np.array([g[0] for g in golds])
    gains = np.array([g.max() - g[0] for g in golds])
    assert cmap.evals(np.median(starts)) == pytest.approx(BASE)
    assert cmap.eval_factor * np.median(gains) == pytest.approx(GAIN)
    sim = _sim({**suite_task("trl-heldout", split="all"), **PLAIN}, 1)
    by_id = {t.run_id: t for t in read_traces(CORPUS)}
    for j, run in enumerate(job_runs(sim.curves)):
        if run is not None:  # a resampled gold under the one map: first checkpoint i = 1 / K
            t = by_id[run]
            x = t.step / t.step[-1]
            want = cmap.evals(np.interp(np.arange(1, 21) / 20, x, t.gold))
            np.testing.assert_allclose(sim.curves.true_eval[j], want)


def test_a_runs_future_does_not_enter_its_scaling(tmp_path: Path) -> None:
    """Raising one run's peak changes its own per-run scale but not the common map.

    (The jitter's spreads are between-run statistics of the whole corpus, not a map.)
    """
    traces = read_traces(CORPUS)
    gains = np.array([t.gold.max() - t.gold[0] for t in traces])
    i = int(np.argmax(gains))  # the top gainer: a higher peak moves no median
    t = traces[i]
    late = t.gold.copy()
    late[-1] = late.max() + 1.0
    traces[i] = dataclasses.replace(t, gold=late)
    path = tmp_path / "changed.jsonl"
    write_traces(traces, path)
    new, old = corpus_map(str(path)), corpus_map(CORPUS)
    affine = ("gold_start", "eval_factor", "loss_start", "loss_factor")
    assert [getattr(new, f) for f in affine] == [getattr(old, f) for f in affine]


def test_a_run_that_never_rises_scales_sanely(tmp_path: Path) -> None:
    """A run whose gold peaks at its first checkpoint: nothing ever reaches |value| > 10."""
    traces = read_traces(CORPUS)
    flat = traces[0]
    falling = np.linspace(0.0, -1.0, len(flat.step))
    traces[0] = dataclasses.replace(flat, gold=falling, eval=falling, label=True)
    path = tmp_path / "falling.jsonl"
    write_traces(traces, path)
    kw = {**suite_task("trl-heldout", curves=str(path), split="all")}
    for seed in range(4):
        sim = _sim(kw, seed, 100)
        rl = sim.batch.job_type == RLHF
        for a in (sim.curves.true_eval, sim.curves.obs_eval, sim.curves.loss):
            assert np.all(np.abs(a[rl]) <= 10)


def test_fresh_noise_is_drawn_each_episode_at_the_runs_measured_sd() -> None:
    kw = {**suite_task("trl-heldout", split="all"), **PLAIN}
    cmap = corpus_map(CORPUS)
    by_id = {t.run_id: t for t in read_traces(CORPUS)}
    z = []
    for seed in range(4):
        sim = _sim(kw, seed, 200)
        for j, run in enumerate(job_runs(sim.curves)):
            if run is not None:
                sd = cmap.eval_factor * run_noise_sd(by_id[run])
                z.append((sim.curves.obs_eval[j] - sim.curves.true_eval[j]) / sd)
    z = np.concatenate(z)
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1.0) < 0.05
    assert corpus_eval_noise(CORPUS) == pytest.approx(
        cmap.eval_factor * np.median([run_noise_sd(t) for t in by_id.values()])
    )
    a, b = _sim(kw, 0).curves, _sim(kw, 0).curves
    np.testing.assert_array_equal(a.obs_eval, b.obs_eval)  # one seed, one episode


def test_a_run_replayed_twice_shows_two_sequences() -> None:
    kw = {**suite_task("trl-heldout", split="all"), **PLAIN}
    seqs: dict[str, list[np.ndarray]] = {}
    for seed in range(3):
        sim = _sim(kw, seed)
        for j, run in enumerate(job_runs(sim.curves)):
            if run is not None:
                seqs.setdefault(run, []).append(sim.curves.obs_eval[j])
    twice = [v for v in seqs.values() if len(v) >= 2]
    assert twice and all(not np.array_equal(v[0], v[1]) for v in twice)


def test_the_loss_is_no_longer_a_constant_for_kl_penalised_runs() -> None:
    """The per-run loss map made every beta > 0 run's loss exactly 1.0; the common one does not."""
    traces = {t.run_id: t for t in read_traces(CORPUS)}
    run_kw = {**suite_task("trl-gao"), "n_jobs": 120}
    common = {**suite_task("trl-heldout", split="all"), **PLAIN, "n_jobs": 120}
    old, new = _sim(run_kw, 2, 120), _sim(common, 2, 120)
    for sim, constant in ((old, True), (new, False)):
        for j, run in enumerate(job_runs(sim.curves)):
            if run is not None and traces[run].meta["beta"] > 0:
                assert bool(np.all(sim.curves.loss[j] == 1.0)) is constant


def test_jitter_and_warp_move_a_run_by_the_corpus_spread() -> None:
    cmap = corpus_map(CORPUS)
    assert isinstance(cmap, CorpusMap) and cmap.log_gain_sd > 0 and cmap.log_peak_sd > 0
    kw = suite_task("trl-heldout", split="all")
    sim = _sim(kw, 3, 200)
    gains = []
    for j, run in enumerate(job_runs(sim.curves)):
        if run is not None:
            gains.append(sim.curves.true_eval[j].max() - BASE)
    plain = _sim({**kw, **PLAIN}, 3, 200)
    plain_gains = [
        plain.curves.true_eval[j].max() - BASE
        for j, r in enumerate(job_runs(plain.curves))
        if r is not None
    ]
    assert np.std(np.log(np.maximum(gains, 1e-3))) > np.std(np.log(np.maximum(plain_gains, 1e-3)))
    peaks = sim.curves.peak_progress[np.isfinite(sim.curves.peak_progress)]
    assert np.all((peaks >= 0) & (peaks <= 1))
