"""The TRL corpus: gold reward, proxy training, a tiny real TRL run, and the shipped corpus."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evalstop_gym.corpus import CurveTraceError, label_hacking
from evalstop_gym.corpus.packaged import (
    TRL_CORPUS,
    TRL_CORPUS_QUICK,
    corpus_path,
    load_corpus,
    sha256_of,
    sidecar,
)

# --------------------------------------------------------------------------------------------
# The shipped corpora (numpy only)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [TRL_CORPUS, TRL_CORPUS_QUICK])
def test_shipped_corpus_matches_its_hash_and_labels(name):
    """The committed JSONL has the sidecar's hash, run count, and labels from its gold curves."""
    traces = load_corpus(name)
    meta = sidecar(name)
    assert len(traces) == meta["runs"]
    assert sha256_of(corpus_path(name)) == meta["sha256"]
    assert corpus_path(name).stat().st_size <= 2_000_000
    for tr in traces:
        assert tr.gold is not None and tr.kl is not None and tr.proxy is not None
        assert tr.label == label_hacking(tr.gold)
        assert tr.step[0] == 0 and tr.meta["source"] == "trl"


def test_full_corpus_mixes_hacking_and_healthy_runs():
    """Issue 12: at least 48 runs, 30 to 70 % of them hacking."""
    traces = load_corpus(TRL_CORPUS)
    frac = np.mean([bool(t.label) for t in traces])
    assert len(traces) >= 48
    assert 0.3 <= frac <= 0.7


def test_tampered_corpus_is_refused(tmp_path, monkeypatch):
    """A corpus whose bytes differ from the recorded hash raises, naming both hashes."""
    import evalstop_gym.corpus.packaged as packaged

    src = corpus_path(TRL_CORPUS_QUICK)
    (tmp_path / f"{TRL_CORPUS_QUICK}.jsonl").write_bytes(src.read_bytes() + b"\n")
    (tmp_path / f"{TRL_CORPUS_QUICK}.json").write_text(json.dumps(sidecar(TRL_CORPUS_QUICK)))
    monkeypatch.setattr(packaged, "DATA_DIR", tmp_path)
    with pytest.raises(CurveTraceError, match="SHA-256"):
        load_corpus(TRL_CORPUS_QUICK)


# --------------------------------------------------------------------------------------------
# Gold reward (numpy only)
# --------------------------------------------------------------------------------------------


def test_gold_reward_is_deterministic_and_standardised():
    """Two builds agree exactly; base-chain completions score mean ~0, sd ~1; text = ids."""
    from evalstop_corpora.trl.world import (
        COMPLETION_WORDS,
        GoldReward,
        sample_chain,
        to_text,
    )

    words = sample_chain(4000, COMPLETION_WORDS, seed=123)
    a, b = GoldReward(), GoldReward()
    np.testing.assert_array_equal(a.score_ids(words), b.score_ids(words))
    scores = a.score_ids(words)
    assert abs(scores.mean()) < 0.1 and abs(scores.std() - 1) < 0.1
    np.testing.assert_allclose(a.score_texts(to_text(words)), scores, rtol=0, atol=1e-12)


def test_gold_reward_punishes_repetition():
    """Diminishing returns: ten copies of the best single word score below the base mean."""
    from evalstop_corpora.trl.world import COMPLETION_WORDS, gold_reward

    gold = gold_reward()
    best = int(np.argmax(gold.unigram))
    assert gold.score_ids(np.full((1, COMPLETION_WORDS), best))[0] < 0


# --------------------------------------------------------------------------------------------
# Proxy training (torch)
# --------------------------------------------------------------------------------------------


def test_proxy_training_is_deterministic_per_seed():
    """Same seed: identical weights; another seed: different weights."""
    pytest.importorskip("torch")
    from evalstop_corpora.trl.proxy import label_pairs, train_proxy
    from evalstop_corpora.trl.world import COMPLETION_WORDS, sample_chain

    a = sample_chain(64, COMPLETION_WORDS, seed=1)
    b = sample_chain(64, COMPLETION_WORDS, seed=2)
    ref = sample_chain(256, COMPLETION_WORDS, seed=3)

    def fit(seed):
        win, lose = label_pairs(a, b, 0.3, seed=seed)
        proxy = train_proxy(
            win, lose, hidden=8, epochs=20, lr=1e-2, weight_decay=1e-3, seed=seed, reference=ref
        )
        return [p.detach().numpy().copy() for p in proxy.parameters()]

    first, again, other = fit(5), fit(5), fit(6)
    for x, y in zip(first, again, strict=True):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(first, other, strict=True))


def test_specs_cover_the_grid_once_and_overrides_win():
    """48 runs: every cell once, distinct seeds; an override replaces a swept value."""
    pytest.importorskip("transformers")
    from evalstop_corpora.trl.generate import QUICK_OVERRIDES, TRL_GRID, trl_specs

    specs = trl_specs(48, seed=0)
    cells = {(s.beta, s.n_pairs, s.proxy_hidden, s.lr) for s in specs}
    assert len(cells) == 48 == np.prod([len(v) for v in TRL_GRID.values()])
    assert len({s.seed for s in specs}) == 48
    quick = trl_specs(8, seed=1, **QUICK_OVERRIDES)
    assert {s.lr for s in quick} == {QUICK_OVERRIDES["lr"]}
    assert all(s.steps == QUICK_OVERRIDES["steps"] for s in quick)


# --------------------------------------------------------------------------------------------
# A tiny real TRL run
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A 4-step GRPO run on a briefly pre-trained base model; returns (config, out folder)."""
    pytest.importorskip("trl")
    from evalstop_corpora.trl.run import TRLRunConfig, run_trl
    from evalstop_corpora.trl.world import BaseRecipe, build_base

    root = tmp_path_factory.mktemp("trl")
    base = build_base(root / "base", BaseRecipe(corpus_size=500, steps=10, batch=32))
    config = TRLRunConfig(
        seed=3,
        n_pairs=32,
        beta=0.1,
        steps=4,
        eval_every=2,
        prompts_per_step=2,
        num_generations=4,
        proxy_epochs=20,
        gold_batch=64,
        eval_batch=32,
    )
    out = root / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")  # nothing may be downloaded
        trace = run_trl(config, base, out)
    return config, out, trace


@pytest.mark.slow
def test_tiny_trl_run_leaves_a_trainer_state_the_loader_reads(tiny_run):
    """trainer_state.json from TRL itself: gold eval at every checkpoint, loss at every step."""
    from evalstop_corpora.trl.run import LOADER_KEYS
    from evalstop_gym.corpus import load_trl_trainer_state

    config, out, trace = tiny_run
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == config.steps
    history = state["log_history"]
    gold_steps = [e["step"] for e in history if "eval_gold" in e]
    loss_steps = [e["step"] for e in history if "loss" in e]
    assert gold_steps == [0, 2, 4]
    # Logging an eval from a callback must not swallow that step's training log.
    assert loss_steps == [1, 2, 3, 4]
    assert any("kl" in e for e in history)  # GRPO's own KL metric (beta > 0)
    loaded = load_trl_trainer_state(out / "trainer_state.json", **LOADER_KEYS)
    np.testing.assert_array_equal(loaded.step, [0, 2, 4])
    np.testing.assert_array_equal(loaded.gold, trace.gold)
    assert loaded.run_id == "run" and trace.run_id == config.run_id()
    assert trace.kl[0] == 0.0 and np.all(np.isfinite(trace.gold))


@pytest.mark.slow
def test_tiny_trl_run_is_reproducible(tiny_run, tmp_path, monkeypatch):
    """The same configuration on the same base gives the same curves."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from evalstop_corpora.trl.run import run_trl

    config, out, trace = tiny_run
    again = run_trl(config, out.parent / "base", tmp_path / "again")
    np.testing.assert_array_equal(again.gold, trace.gold)
    np.testing.assert_array_equal(again.kl, trace.kl)
    np.testing.assert_array_equal(again.loss, trace.loss)


@pytest.mark.slow
def test_corpus_generation_resumes_from_finished_folders(tiny_run, tmp_path, monkeypatch):
    """A second generate over the same folder reads the finished run instead of training it."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import shutil

    from evalstop_corpora.trl.generate import TRACES_FILE, generate_trl_corpus
    from evalstop_corpora.trl.world import BaseRecipe
    from evalstop_gym.corpus import read_traces

    config, out, trace = tiny_run
    shutil.copytree(out.parent / "base", tmp_path / "base")
    shutil.copytree(out, tmp_path / "runs" / config.run_id())
    timings: list[float] = []
    traces = generate_trl_corpus(
        [config],
        tmp_path,
        workers=1,
        progress=False,
        base_recipe=BaseRecipe(corpus_size=500, steps=10, batch=32),
        timings=timings,
    )
    assert timings == []  # reused, not retrained
    np.testing.assert_array_equal(traces[0].gold, trace.gold)
    assert read_traces(tmp_path / TRACES_FILE)[0].run_id == config.run_id()
