"""The English RLHF corpus: VADER gold, the run grid, the shipped corpora, two runs regenerated."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from evalstop_gym.corpus import label_hacking
from evalstop_gym.corpus.packaged import (
    DATA_DIR,
    ENGLISH_CORPUS,
    ENGLISH_CORPUS_QUICK,
    corpus_path,
    load_corpus,
    sha256_of,
    sidecar,
)

pytest.importorskip("vaderSentiment")

ENGLISH, ENGLISH_QUICK = ENGLISH_CORPUS, ENGLISH_CORPUS_QUICK
SHIPPED = [n for n in (ENGLISH, ENGLISH_QUICK) if (DATA_DIR / f"{n}.jsonl").exists()]

# --------------------------------------------------------------------------------------------
# Gold (vaderSentiment only)
# --------------------------------------------------------------------------------------------


def test_lexicon_carries_ten_human_ratings_whose_mean_is_the_entry():
    """Every entry has ten integer ratings in [-4, 4] whose mean is the entry's valence."""
    from evalstop_corpora.english.gold import N_RATERS, lexicon_ratings

    ratings = lexicon_ratings()
    assert len(ratings) > 7000
    for mean, ten in list(ratings.values())[::97]:
        assert len(ten) == N_RATERS and all(-4 <= r <= 4 for r in ten)
        assert mean == pytest.approx(np.mean(ten), abs=0.051)


def test_gold_is_vader_compound_and_one_rater_differs():
    """Mean-rating gold is VADER's own compound; a rater's lexicon scores some texts otherwise."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    from evalstop_corpora.english.gold import ONE_RATER_CHECK, gold_scores

    texts = ["this is a good and useful function", "the error is bad", "returns None", "not great"]
    stock = [SentimentIntensityAnalyzer().polarity_scores(t)["compound"] for t in texts]
    np.testing.assert_array_equal(gold_scores(texts), stock)
    assert np.all(np.abs(gold_scores(texts, rater=ONE_RATER_CHECK)) <= 1)
    assert not np.array_equal(gold_scores(texts, rater=ONE_RATER_CHECK), gold_scores(texts))
    with pytest.raises(ValueError, match="rater"):
        gold_scores(texts, rater=10)


def test_gold_counts_a_repeated_word_once():
    """Repeating a positive word raises VADER's plain compound, not the gold."""
    from evalstop_corpora.english.gold import first_mentions, gold_scores

    assert first_mentions("Great, great GREAT value value") == "Great, value"
    once, thrice = "a great value", "a great great great value"
    assert gold_scores([thrice])[0] == gold_scores([once])[0]
    assert gold_scores([thrice], repeats=True)[0] > gold_scores([once], repeats=True)[0]


@pytest.mark.slow  # reads and tokenizes the standard library's docstrings (~9 CPU-s)
def test_held_out_text_is_disjoint_from_training_text():
    """The prompts' paragraphs never occur in the pre-training paragraphs."""
    from evalstop_corpora.english.text import split_text

    train, held = split_text()
    assert len(held) > 100 and len(train) > 9 * len(held) - 10
    assert not set(train) & set(held)


# --------------------------------------------------------------------------------------------
# The grid
# --------------------------------------------------------------------------------------------


def test_specs_cover_the_grid_and_take_each_trainers_beta():
    """36 runs cover the 36 cells once; beta comes from the trainer's row; ids are unique."""
    from evalstop_corpora.english.generate import BETAS, ENGLISH_GRID, english_specs

    specs = english_specs(36, seed=0)
    cells = {(s.trainer, s.beta, s.proxy) for s in specs}
    assert len(cells) == 36
    assert all(s.beta in BETAS[s.trainer] for s in specs)
    assert {s.proxy for s in specs} == set(ENGLISH_GRID["proxy"])
    assert len({s.run_id() for s in english_specs(108, seed=0)}) == 108
    assert english_specs(5, seed=0, steps=7)[0].steps == 7


@pytest.mark.parametrize(
    ("field", "value"),
    [("trainer", "ppo"), ("proxy", "nope"), ("steps", 0), ("gold_batch", 33), ("beta", -1.0)],
)
def test_bad_run_config_is_refused_naming_the_field(field, value):
    """A configuration that cannot run raises before any work, naming the field."""
    from evalstop_corpora.english.run import EnglishRunConfig

    with pytest.raises(ValueError, match=field):
        EnglishRunConfig(**{field: value})


def test_cli_refuses_zero_runs_in_one_line(tmp_path, capsys):
    """``--runs 0`` is refused before any work, naming the flag and what is allowed."""
    pytest.importorskip("trl")
    from evalstop_cli.main import main

    out = tmp_path / "out"
    assert (
        main(["curves", "generate", "--source", "english", "--runs", "0", "--out", str(out)]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--runs=0" in err[0] and ">= 1" in err[0]
    assert not (out / "base").exists()


# --------------------------------------------------------------------------------------------
# The shipped corpora (numpy only)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_english_corpus_matches_its_hash_and_labels(name):
    """Hash and run count as recorded; labels by the gold's own noise; real TRL trainers."""
    from evalstop_corpora.english.generate import NOISE_MULTIPLE

    traces = load_corpus(name)
    meta = sidecar(name)
    assert len(traces) == meta["runs"] and sha256_of(corpus_path(name)) == meta["sha256"]
    assert corpus_path(name).stat().st_size <= 4_000_000
    for tr in traces:
        assert tr.gold is not None and tr.kl is not None and tr.proxy is not None
        noise = tr.meta["gold_noise_sd"]
        assert tr.label == label_hacking(tr.gold, min_abs_drop=NOISE_MULTIPLE * noise)
        assert tr.meta["source"] == "english" and tr.step[0] == 0
        assert tr.meta["trainer_class"] in ("GRPOTrainer", "RLOOTrainer", "OnlineDPOTrainer")
        assert tr.meta["eval_noise_sd"] > 0
        assert math.isclose(
            tr.meta["eval_noise_sd"] * math.sqrt(tr.meta["eval_batch"]),
            noise * math.sqrt(tr.meta["gold_batch"]),
            rel_tol=0.5,
        )


@pytest.mark.skipif(ENGLISH not in SHIPPED, reason="the full English corpus is not shipped")
def test_full_english_corpus_has_twenty_real_checkpoints_and_every_trainer():
    """Every run has >= 20 checkpoints (no interpolation); all three trainers are present."""
    traces = load_corpus(ENGLISH)
    assert all(len(t.step) >= 20 for t in traces)
    assert {t.meta["trainer"] for t in traces} == {"grpo", "rloo", "online_dpo"}


# --------------------------------------------------------------------------------------------
# Two quick runs regenerated bit for bit (torch, TRL; builds the policy unless cached)
# --------------------------------------------------------------------------------------------


def _torch_kernels() -> str | None:
    """The CPU kernel set torch dispatches here ("AVX2", "AVX512", ...; None: no torch)."""
    try:
        import torch
    except ImportError:
        return None
    return str(torch.backends.cpu.get_cpu_capability())


#: The kernel set the shipped quick runs were generated with.  On an AVX-512 machine
#: torch's float results differ from the first training step on, and pinning
#: ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA, MKL_CBWR / MKL_ENABLE_INSTRUCTIONS and
#: NPY_DISABLE_CPU_FEATURES did not restore them: bit for bit holds on this kernel set.
GENERATED_KERNELS = "AVX2"


@pytest.mark.slow
@pytest.mark.skipif(ENGLISH_QUICK not in SHIPPED, reason="the quick English corpus is not shipped")
def test_two_quick_runs_regenerate_bit_for_bit(tmp_path):
    """The first two runs of the quick corpus, rerun, give the shipped traces exactly.

    The policy and proxies come from ``$EVALSTOP_ENGLISH_BASE`` (a generated corpus's
    ``base/`` folder) if set, else they are built here (about five CPU-minutes).
    """
    pytest.importorskip("trl")
    kernels = _torch_kernels()
    if kernels != GENERATED_KERNELS:
        pytest.skip(
            f"torch dispatches {kernels} kernels here; the shipped runs were generated with "
            f"{GENERATED_KERNELS} ones, whose float results differ"
        )
    from evalstop_corpora.english.generate import (
        QUICK_OVERRIDES,
        build_world,
        english_specs,
        run_spec,
        trace_of,
    )

    base = Path(os.environ.get("EVALSTOP_ENGLISH_BASE", tmp_path / "base"))
    shipped = {t.run_id: t for t in load_corpus(ENGLISH_QUICK)}
    specs = [s for s in english_specs(9, 0, **QUICK_OVERRIDES) if s.run_id() in shipped][:2]
    assert len(specs) == 2
    policy, proxies = build_world(base, [s.proxy for s in specs])
    for spec in specs:
        run_spec(spec, policy, proxies, str(tmp_path / "runs"))
        got, want = trace_of(tmp_path / "runs" / spec.run_id()), shipped[spec.run_id()]
        for field in ("step", "eval", "loss", "proxy", "kl", "gold"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=field)
        assert got.label == want.label
