"""benchmarks/suite/sim_to_real.py: its parts, its tables, and what it refuses (heavy steps faked)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evalstop_experiments.sim_to_real import CheckRow, SideScore
from evalstop_experiments.sim_to_real_trainers import TRAINERS, TrainerRow
from evalstop_gym import ConfigError

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "suite" / "sim_to_real.py"


@pytest.fixture
def script(monkeypatch):
    spec = importlib.util.spec_from_file_location("sim_to_real_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def rows(prices):
        s = SideScore(0.1, 0.0, 0.2)
        return [
            CheckRow(f, n, "floor", s, SideScore(0.1 * i, 0.1 * i - 0.1, 0.1 * i + 0.1))
            for f in prices
            for i, n in enumerate("abc")
        ]

    monkeypatch.setattr(mod, "run_check", lambda prices, seeds, progress=None: (rows(prices), {}))

    def oos(out, prices, progress=None, **recipe):
        mod.asked.append(recipe)
        return rows(prices)

    def trainers(out, corpora, progress=None):
        mod.asked.append({"trainers": corpora})
        s = SideScore(0.1, 0.0, 0.2)
        real = {k: SideScore(0.3, 0.2, 0.4) for k in ("all", *TRAINERS)}
        return [
            TrainerRow(c, n, s, real)
            for c, _ in [("english_rlhf (test runs)", 0), *corpora]
            for n in "ab"
        ]

    mod.asked = []
    monkeypatch.setattr(mod, "out_of_sample", oos)
    monkeypatch.setattr(mod, "by_trainer", trainers)
    return mod


def test_check_oos_and_the_map_write_their_tables(script, tmp_path) -> None:
    assert (
        script.main(["--out", str(tmp_path), "--parts", "check,oos,break-even", "--prices", "1"])
        == 0
    )
    check = (tmp_path / "check.md").read_text(encoding="utf-8")
    assert "| 1x | a |" in check and "| 4x |" not in check  # the map's prices stay out of the check
    header = (tmp_path / "break_even.md").read_text(encoding="utf-8").splitlines()[0]
    assert header == "| eval batch | 0.5x | 1x | 2x | 4x | 8x |"
    data = json.loads((tmp_path / "rows.json").read_text(encoding="utf-8"))
    assert {r["price_factor"] for r in data["check"]} == {0.5, 1.0, 2.0, 4.0, 8.0}
    assert script.asked == [{"eval_batch": 64, "corpus": "english_rlhf_b64"}]


def test_the_out_of_sample_corpus_and_its_batch_are_chosen(script, tmp_path) -> None:
    flags = ["--parts", "oos", "--oos-corpus", "english_rlhf", "--oos-batch", "32"]
    assert script.main(["--out", str(tmp_path), *flags]) == 0
    assert script.asked == [{"eval_batch": 32, "corpus": "english_rlhf"}]
    for bad, match in (
        (["--oos-corpus", "trl_gao"], "a shipped English corpus"),
        (["--oos-batch", "0"], "--oos-batch=0"),
        (["--oos-batch", "32"], "another batch than the check's 32"),  # with break-even
    ):
        with pytest.raises(ConfigError, match=match):
            script.main(["--out", str(tmp_path / "new"), *bad])
    assert not (tmp_path / "new").exists()  # refused before any work


def test_a_finished_table_and_bad_flags_are_refused(script, tmp_path) -> None:
    (tmp_path / "check.md").write_text("mine\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="--out"):
        script.main(["--out", str(tmp_path), "--parts", "check"])
    assert (tmp_path / "check.md").read_text(encoding="utf-8") == "mine\n"
    for flags in (["--parts", "bogus"], ["--parts", ""], ["--prices", "0"], ["--prices", "x"]):
        with pytest.raises(ConfigError):
            script.main(["--out", str(tmp_path / "new"), *flags])


def test_the_trainers_part_is_named_and_writes_its_table(script, tmp_path) -> None:
    assert "trainers" not in script.PARTS  # not in the default parts: named only
    flags = ["--parts", "trainers", "--trainer-corpora", "english_rlhf_b64:64,english_rlhf:32"]
    assert script.main(["--out", str(tmp_path / "t"), *flags]) == 0
    assert script.asked[-1] == {"trainers": [("english_rlhf_b64", 64), ("english_rlhf", 32)]}
    table = (tmp_path / "t" / "by_trainer.md").read_text(encoding="utf-8")
    assert "| a | 0.10 | 0.30 | 0.30 | 0.30 | 0.30 |" in table
    assert table.count("| mean abs diff | | 0.20 | 0.20 | 0.20 | 0.20 |") == 3
    for bad in ("english_rlhf_b64", "trl_gao:32", "english_rlhf:0", "english_rlhf:x"):
        with pytest.raises(ConfigError, match="--trainer-corpora"):
            script.main(
                ["--out", str(tmp_path / "new"), "--parts", "trainers", "--trainer-corpora", bad]
            )


def test_the_pool_part_writes_each_checks_table_and_refuses_bad_names(
    script, tmp_path, monkeypatch
) -> None:
    def pool(out, name, prices, seeds, form="rise", progress=None):
        script.asked.append((name, form))
        s = SideScore(0.1, 0.0, 0.2)
        return [CheckRow(f, "a", "floor", s, s) for f in prices]

    monkeypatch.setattr(script, "run_pool_check", pool)
    args = ["--out", str(tmp_path), "--parts", "pool", "--prices", "1"]
    assert script.main([*args, "--pool-checks", "heldout,loo-b64", "--pool-form", "shape"]) == 0
    assert script.asked == [("heldout", "shape"), ("loo-b64", "shape")]
    text = (tmp_path / "pool.md").read_text(encoding="utf-8")
    assert "## heldout (shape)" in text and "## loo-b64 (shape)" in text
    assert (tmp_path / "pool_heldout.md").exists()
    rows = json.loads((tmp_path / "rows.json").read_text(encoding="utf-8"))["pool"]
    assert {r["check"] for r in rows} == {"heldout", "loo-b64"}
    with pytest.raises(ConfigError, match="--out"):  # a finished table is never overwritten
        script.main([*args, "--pool-checks", "heldout"])
    (tmp_path / "pool.md").unlink()  # a run stopped after its first check: that table stays
    with pytest.raises(ConfigError, match=r"pool_heldout\.md"):
        script.main([*args, "--pool-checks", "heldout"])
    fresh = ["--out", str(tmp_path / "new"), "--parts", "pool"]
    with pytest.raises(ConfigError, match="--pool-checks"):
        script.main([*fresh, "--pool-checks", "nope"])
    with pytest.raises(ConfigError, match="--pool-form"):
        script.main([*fresh, "--pool-form", "wiggly"])


def test_the_spread_part_names_both_corpora(script, tmp_path, monkeypatch) -> None:
    def spread(out, check, other, prices, seeds, form="rise", progress=None):
        script.asked.append((check, other))
        s = SideScore(0.1, 0.0, 0.2)
        return [CheckRow(f, "a", "floor", s, SideScore(0.3, 0.2, 0.4)) for f in prices]

    monkeypatch.setattr(script, "corpus_spread", spread)
    args = ["--out", str(tmp_path), "--parts", "spread", "--prices", "1"]
    assert script.main([*args, "--spread", "loo-s2:english_rlhf_s3"]) == 0
    assert script.asked == [("loo-s2", "english_rlhf_s3")]
    text = (tmp_path / "spread.md").read_text(encoding="utf-8")
    assert "| english_rlhf_s2 [95 % CI] | english_rlhf_s3 [95 % CI] |" in text
    assert "| 1x | a | floor |" in text


def test_a_spread_needs_a_corpus_the_pool_never_read() -> None:
    from evalstop_experiments.sim_to_real_pool import corpus_spread

    for other in ("english_rlhf_s2", "english_rlhf_b64"):  # loo-s2's target, and its pool's
        with pytest.raises(ConfigError, match="other"):
            corpus_spread("unused", "loo-s2", other, [1.0])
