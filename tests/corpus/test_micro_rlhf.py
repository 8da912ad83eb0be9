"""Tests of the micro-RLHF runs: real over-optimisation, determinism, corpus generation, CLI."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from evalstop_corpora.micro_rlhf.generate import (  # noqa: E402
    SWEEP_GRID,
    add_arguments,
    generate_corpus,
    main,
    sweep_configs,
)
from evalstop_corpora.micro_rlhf.model import LENGTH, VOCAB, GoldReward, gold_reward  # noqa: E402
from evalstop_corpora.micro_rlhf.train import MicroRLHFConfig, run_micro_rlhf  # noqa: E402
from evalstop_gym.corpus import (  # noqa: E402
    fit_gao_trace,
    label_hacking,
    read_traces,
    write_traces,
)

TINY = MicroRLHFConfig(seed=5, n_pairs=32, proxy_hidden=8, steps=12, checkpoints=4, gold_batch=256)
# A small proxy data set and no KL penalty: the policy outruns what 32 comparisons taught the proxy
# (seeds 0-3 of this cell are labelled hacking, seed 4 peaks at 90 % and is not).
HACKING = MicroRLHFConfig(seed=0, n_pairs=32, proxy_hidden=64, kl_beta=0.0, lr=1e-3)
# Plenty of comparisons, a proxy able to learn diminishing returns, and a KL leash (healthy on
# seeds 0-4 at lr 1e-3 and 2e-3).
HEALTHY = MicroRLHFConfig(seed=1, n_pairs=4096, proxy_hidden=64, kl_beta=0.3, lr=2e-3)


@pytest.fixture(scope="module")
def hacking_trace():
    return run_micro_rlhf(HACKING)


@pytest.fixture(scope="module")
def healthy_trace():
    return run_micro_rlhf(HEALTHY)


def test_gold_reward_is_standardised_and_concave() -> None:
    from evalstop_corpora.micro_rlhf.model import base_chain_sample

    gold = gold_reward()
    assert isinstance(gold, GoldReward)
    scores = gold(base_chain_sample(20_000, seed=3))
    assert abs(float(scores.mean())) < 0.05 and abs(float(scores.std()) - 1) < 0.05
    assert 0 <= int(base_chain_sample(10, seed=0).max()) < VOCAB
    # Swapping copies of the worst token for the best one pays less and less (concave) ...
    best, worst = int(torch.argmax(gold.unigram)), int(torch.argmin(gold.unigram))
    family = torch.tensor([[best] * c + [worst] * (LENGTH - c) for c in range(LENGTH + 1)])
    assert torch.all(torch.diff(gold(family), 2)[:-1] < 0)
    # ... so the sequence a linearly extrapolating proxy loves, all best token, is mediocre.
    assert float(gold(family[-1:])) < float(torch.quantile(scores, 0.9))


def test_tiny_run_round_trips_and_is_deterministic(tmp_path: Path) -> None:
    trace = run_micro_rlhf(TINY)
    assert trace.step.tolist() == [0, 3, 6, 9, 12]
    assert trace.kl[0] == pytest.approx(0.0, abs=0.05)  # step 0 is the initial policy
    for name in ("eval", "loss", "proxy", "kl", "gold"):
        assert np.all(np.isfinite(getattr(trace, name)))
    assert trace.label is label_hacking(trace.gold)
    assert trace.meta["n_pairs"] == 32 and trace.meta["source"] == "micro_rlhf"
    write_traces([trace], tmp_path / "t.jsonl")
    assert read_traces(tmp_path / "t.jsonl") == [trace]
    assert run_micro_rlhf(TINY) == trace  # fixed seed: identical
    other = run_micro_rlhf(MicroRLHFConfig(**{**TINY.__dict__, "seed": 6}))
    assert not np.array_equal(other.gold, trace.gold)


def test_small_proxy_data_hacks(hacking_trace) -> None:
    g, proxy = hacking_trace.gold, hacking_trace.proxy
    k = int(np.argmax(g))
    assert k < len(g) - 3, "gold should peak well before the end"
    assert g[k] - g[-1] > 0.3  # in gold standard deviations of the base policy
    assert proxy[-1] > proxy[k] + 0.1, "the proxy keeps rising after the gold peak"
    assert hacking_trace.kl[-1] > hacking_trace.kl[k]
    assert hacking_trace.label is True and label_hacking(g)


@pytest.mark.slow
def test_large_proxy_data_with_kl_penalty_stays_healthy(healthy_trace) -> None:
    g = healthy_trace.gold
    assert g[-1] - g[0] > 1.0  # it does improve the gold score
    assert g.max() - g[-1] < 0.2 * (g.max() - g.min())
    assert healthy_trace.label is False and not label_hacking(g)
    assert healthy_trace.kl[-1] < 10  # the KL penalty keeps it close to the initial policy


def test_eval_is_a_noisy_view_of_gold(hacking_trace) -> None:
    resid = hacking_trace.eval - hacking_trace.gold
    # eval uses 32 samples against gold's 1024: visibly noisy, yet tracking gold.
    assert 0.02 < float(np.std(resid)) < 0.6
    assert np.corrcoef(hacking_trace.eval, hacking_trace.gold)[0, 1] > 0.8


def test_gao_fit_on_real_runs(hacking_trace, healthy_trace) -> None:
    hack, healthy = fit_gao_trace(hacking_trace), fit_gao_trace(healthy_trace)
    assert hack.beta > 0  # the curve turns over as d grows
    assert hack.r2 > 0.5 and healthy.r2 > 0.5
    assert healthy.alpha > 0


@pytest.mark.parametrize(
    ("field", "value"), [("n_pairs", 0), ("steps", 0), ("checkpoints", 500), ("lr", 0.0)]
)
def test_config_validation(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field if field != "lr" else "lr > 0"):
        MicroRLHFConfig(**{field: value})


def test_sweep_configs_cover_grid_with_unique_seeds() -> None:
    n_cells = int(np.prod([len(v) for v in SWEEP_GRID.values()]))
    configs = sweep_configs(n_cells, seed=2)
    cells = {(c.n_pairs, c.proxy_hidden, c.kl_beta, c.lr) for c in configs}
    assert len(cells) == n_cells
    assert (
        len({c.seed for c in configs}) == n_cells and len({c.run_id() for c in configs}) == n_cells
    )
    assert sweep_configs(5, seed=2) == configs[:5]
    assert sweep_configs(3, seed=2, steps=7, checkpoints=7)[0].steps == 7
    assert {c.lr for c in sweep_configs(4, seed=2, lr=7e-4)} == {7e-4}  # overrides win


@pytest.mark.slow
def test_local_corpus_matches_in_process_runs(tmp_path: Path) -> None:
    configs = sweep_configs(3, seed=9, steps=10, checkpoints=2, gold_batch=128)
    timings: list[float] = []
    traces = generate_corpus(
        0, tmp_path / "c.jsonl", configs=configs, workers=2, progress=False, timings=timings
    )
    assert [t.run_id for t in traces] == [c.run_id() for c in configs]
    assert len(timings) == 3 and all(t > 0 for t in timings)
    assert read_traces(tmp_path / "c.jsonl") == traces
    assert traces == [run_micro_rlhf(c) for c in configs]
    assert all(t.label is label_hacking(t.gold) for t in traces)


@pytest.mark.slow
def test_ray_backend_gives_identical_traces(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    configs = sweep_configs(3, seed=9, steps=10, checkpoints=2, gold_batch=128)
    local = generate_corpus(0, tmp_path / "a.jsonl", configs=configs, workers=2, progress=False)
    ray_traces = generate_corpus(
        0, tmp_path / "b.jsonl", configs=configs, workers=2, backend="ray", progress=False
    )
    assert ray_traces == local
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_generate_corpus_argument_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="backend"):
        generate_corpus(1, tmp_path / "x.jsonl", backend="slurm")
    with pytest.raises(ValueError, match="address"):
        generate_corpus(1, tmp_path / "x.jsonl", address="127.0.0.1:6379")
    with pytest.raises(ValueError, match="n_runs"):
        generate_corpus(0, tmp_path / "x.jsonl")


def test_cli_fit_writes_table_plot_summary(
    tmp_path: Path, hacking_trace, healthy_trace, capsys
) -> None:
    write_traces([hacking_trace, healthy_trace], tmp_path / "traces.jsonl")
    assert main(["fit", "--traces", str(tmp_path / "traces.jsonl"), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "hacking 1 (50.0%)" in out and "median R2" in out
    rows = list(csv.DictReader((tmp_path / "gao_fits.csv").open()))
    assert [r["run_id"] for r in rows] == [hacking_trace.run_id, healthy_trace.run_id]
    assert [r["label"] for r in rows] == ["hacking", "healthy"]
    assert {"alpha", "beta", "r2", "peak_progress"} <= set(rows[0])
    assert (tmp_path / "gao_fits.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((tmp_path / "gao_summary.json").read_text())
    assert summary["hacking"] == 1 and summary["fitted"] == 2
    # a second fit into the same folder is refused; the first one's files stay
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()
    assert main(["fit", "--traces", str(tmp_path / "traces.jsonl"), "--out", str(tmp_path)]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_cli_fit_rejects_traces_without_gold(tmp_path: Path, capsys) -> None:
    src = Path(__file__).parents[1] / "data" / "curves" / "traces.jsonl"
    no_gold = [replace(t, gold=None, label=None) for t in read_traces(src)]
    assert no_gold and all(t.gold is None for t in no_gold)  # a valid corpus, only without gold
    write_traces(no_gold, tmp_path / "no_gold.jsonl")
    assert main(["fit", "--traces", str(tmp_path / "no_gold.jsonl"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no run has both 'gold' and 'kl' curves to fit" in err and "no_gold.jsonl" in err
    assert not (tmp_path / "gao_fits.csv").exists()


def test_cli_fit_reports_a_malformed_line(tmp_path: Path, capsys) -> None:
    src = Path(__file__).parents[1] / "data" / "curves" / "traces.jsonl"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(src.read_text().replace('"gold"', '"goldx"', 1))
    assert main(["fit", "--traces", str(bad), "--out", str(tmp_path)]) == 2
    assert "line 1" in capsys.readouterr().err


def test_cli_parser_wiring() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="evalstop-gym curves")
    add_arguments(parser)
    args = parser.parse_args(["generate", "--runs", "5", "--out", "d", "--backend", "ray"])
    assert (args.curves_command, args.runs, args.out, args.backend, args.seed) == (
        "generate",
        5,
        "d",
        "ray",
        0,
    )
    assert args.workers is None and args.address is None


@pytest.mark.slow
def test_cli_generate(tmp_path: Path, capsys) -> None:
    assert main(["generate", "--runs", "2", "--out", str(tmp_path), "--no-progress"]) == 0
    traces = read_traces(tmp_path / "traces.jsonl")
    assert len(traces) == 2 and all(t.label is not None for t in traces)
    assert "2 runs in" in capsys.readouterr().out
