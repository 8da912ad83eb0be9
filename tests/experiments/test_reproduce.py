"""The reproduce harness: end to end, both backends, resume, and the statistics."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest

# The harness's statistics need SciPy (the cli extra); a core install has none.
pytest.importorskip("scipy")

from evalstop_cli.main import main
from evalstop_experiments.experiments import REPORT_ORDER
from evalstop_experiments.experiments.paper import build_cells
from evalstop_experiments.report import write_report
from evalstop_experiments.reproduce import reproduce
from evalstop_experiments.runner import run_tasks
from evalstop_experiments.stats import fmt_ci, mean_ci, pct_change
from evalstop_experiments.summary import summarise
from evalstop_gym.parallel import Executor

TINY = {
    "seeds": 2,
    "n_jobs": 12,
    "progress": False,
    "workers": 1,
    "learned": False,
    "real_curves": False,
    "deprioritisation": False,
}


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_mean_ci_on_a_hand_made_sample() -> None:
    mean, half, n = mean_ci([1.0, 2.0, 3.0, 4.0])
    # sd = 1.2910, sem = 0.6455, t(0.975, 3) = 3.1824
    assert (mean, n) == (2.5, 4)
    assert half == pytest.approx(3.182446 * 0.645497, rel=1e-5)
    m, h, n = mean_ci([5.0, float("nan")])
    assert (m, n) == (5.0, 1) and math.isnan(h)
    assert math.isnan(mean_ci([])[0])
    assert pct_change(90.0, 100.0) == pytest.approx(-10.0)
    assert math.isnan(pct_change(1.0, 0.0))
    assert fmt_ci(0.5, 0.01, 100.0) == "50.0 ± 1.0"


@pytest.mark.slow
def test_tiny_reproduce_end_to_end(tmp_path: Path) -> None:
    res = reproduce(tmp_path, **TINY)
    cells = build_cells({"n_jobs": 12})
    for exp in ("E1", "E2", "E3", "E4", "E5"):
        rows = _read(tmp_path / f"{exp}.csv")
        n_cells = sum(c.experiment == exp for c in cells)
        assert len(rows) == n_cells * 2
        for col in (
            "experiment",
            "group",
            "policy",
            "seed",
            "mean_jct_h",
            "precision",
            "recall",
            "fpr",
            "d_jct_pct",
            "d_waste_pct",
        ):
            assert col in rows[0]
        summ = _read(tmp_path / f"{exp}_summary.csv")
        assert len(summ) == n_cells
        assert {"mean_jct_h", "mean_jct_h_ci95", "d_jct_pct", "seeds"} <= set(summ[0])
        for r in rows:
            if r["policy_kind"] == "NoStop":
                assert float(r["d_jct_pct"]) == 0.0
    e8_rows = _read(tmp_path / "E8.csv")
    assert {r["reference"] for r in e8_rows} == {"Bayes"}
    assert {r["stopper"] for r in e8_rows} >= {"NoStop", "Bayes", "Oracle", "CUSUM (tuned)"}
    assert "stopper_kind" not in e8_rows[0]  # a typed key of the rows, not a CSV column
    assert "normalised" in (tmp_path / "E8.md").read_text().lower()
    assert (tmp_path / "E8_stops_hard-0.12.png").stat().st_size > 0
    assert "(E8_stops_hard-0.12.png)" in (tmp_path / "E8.md").read_text()
    report = (tmp_path / "REPORT.md").read_text()
    for exp in ("E1", "E2", "E3", "E4", "E5"):
        assert f"## {exp}" in report
    assert "paper" in report
    import matplotlib.image as mpimg

    pngs = ["e2_schedulers", "e3_noise", "e4_hack_fraction", "e5_k", "example_curves"]
    for name in pngs:
        img = mpimg.imread(tmp_path / f"{name}.png")
        assert img.ndim == 3 and img.shape[0] > 100
    from evalstop_experiments.experiments.pools import e11_cells  # E11 runs by default too

    assert res.ran == (len(cells) + len(e11_cells({"n_jobs": 12}))) * 2


def test_renaming_labels_changes_no_table(tmp_path: Path) -> None:
    """Tables select rows by typed fields: a relabelled policy or setting keeps its numbers."""
    res = reproduce(tmp_path / "a", experiments=["E1", "E2", "E3", "E5"], **TINY)
    renamed = [{**r, "policy": f"<{r['policy']}>", "group": f"<{r['group']}>"} for r in res.rows]
    reports = []
    for name, rows in (("orig", res.rows), ("renamed", renamed)):
        (tmp_path / name).mkdir()
        reports.append(
            write_report(
                tmp_path / name, summarise(rows), header={}, plots=[], experiments=REPORT_ORDER
            ).read_text()
        )
    orig, new = reports
    assert "<StopAt-0.65>" in new and "<EvalStop>" in new
    numbers = re.compile(r"-?\d+\.\d+")
    assert numbers.findall(new) == numbers.findall(orig)
    assert new.count("–") == orig.count("–")  # no cell went missing
    assert len(numbers.findall(orig)) > 100


def test_rerun_without_resume_refuses_and_resume_reuses(tmp_path: Path) -> None:
    reproduce(tmp_path, experiments=["E1"], **TINY)
    with pytest.raises(FileExistsError, match="--resume"):
        reproduce(tmp_path, experiments=["E1"], **TINY)
    res = reproduce(tmp_path, experiments=["E1"], resume=True, **TINY)
    assert res.ran == 0 and res.reused == 8


def test_interrupted_run_resumed_gives_identical_output(tmp_path: Path) -> None:
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    reproduce(ref, experiments=["E1", "E5"], **TINY)
    cells = build_cells({"n_jobs": 12}, ["E1", "E5"])
    tasks = [(c, s) for c in cells for s in range(2)]
    seen = {"n": 0}

    def interrupt_after_five(n: int) -> None:
        seen["n"] += n
        if seen["n"] >= 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_tasks(tasks, cut, executor=Executor(workers=1), progress=interrupt_after_five)
    assert len(list((cut / "raw").rglob("*.json"))) == 5
    res = reproduce(cut, experiments=["E1", "E5"], resume=True, **TINY)
    assert res.reused == 5 and res.ran == len(tasks) - 5
    for name in ("E1.csv", "E1_summary.csv", "E5.csv", "E5_summary.csv"):
        assert (cut / name).read_bytes() == (ref / name).read_bytes(), name
    # REPORT.md too, but for its timing table (times, and the resumed run's reused episodes)
    assert _without_timing(cut / "REPORT.md") == _without_timing(ref / "REPORT.md")


def _without_timing(report: Path) -> str:
    """REPORT.md without its ``## Timing`` section."""
    text = report.read_text(encoding="utf-8")
    head, _, rest = text.partition("## Timing")
    assert rest, "REPORT.md has no timing section"
    return head + rest[rest.index("\n## ") :]


def test_process_pool_equals_serial(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    reproduce(a, experiments=["E2"], **TINY)
    reproduce(b, experiments=["E2"], **{**TINY, "workers": 2})
    assert (a / "E2.csv").read_bytes() == (b / "E2.csv").read_bytes()


@pytest.mark.slow
def test_ray_backend_equals_local(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    a, b = tmp_path / "local", tmp_path / "ray"
    reproduce(a, experiments=["E1"], **TINY)
    reproduce(b, experiments=["E1"], backend="ray", **{**TINY, "workers": 2})
    for name in ("E1.csv", "E1_summary.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def _has_drawn_pixels(png: Path) -> bool:
    """Whether a plot has coloured (non-grey) pixels: the data, not only axes and text."""
    import matplotlib.image as mpimg

    img = mpimg.imread(png)[..., :3]
    return bool((img.max(axis=-1) - img.min(axis=-1) > 0.2).sum() > 50)


@pytest.mark.slow
def test_learned_and_real_curve_experiments(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    from toy_traces import toy_trace

    from baselines.learned import read_meta
    from evalstop_gym.corpus import write_traces

    corpus = tmp_path / "corpus.jsonl"
    write_traces(
        [
            toy_trace("hack", [0, 1, 2, 3, 4, 3, 2, 1, 0, -1, -2], True),
            toy_trace("ok", list(range(11)), False),
        ],
        corpus,
    )
    out = tmp_path / "out"
    res = reproduce(
        out,
        experiments=["E6", "E7"],
        train_timesteps=600,
        curves=str(corpus),
        **{**TINY, "learned": None, "real_curves": None},
    )
    e6 = _read(out / "E6.csv")
    policies = {r["policy"] for r in e6}
    assert {"EvalStop", "DQN[boundary]", "DQN[full]"} <= policies
    assert len(e6) == 2 * 2 * 6  # 2 noise levels x 6 policies x 2 seeds
    e7 = _read(out / "E7.csv")
    assert {(r["variant"], float(r["value"])) for r in e7} >= {("real", 0.0), ("synthetic", 0.12)}
    report = (out / "REPORT.md").read_text()
    assert "## E6" in report and "## E7" in report and "utility" in report
    models = sorted((out / "models").glob("*.zip"))
    assert len(models) == 4
    # every model was evaluated during training, so the learning-curve plot has points
    for path in models:
        curve = read_meta(path)["learning_curve"]
        assert len(curve) >= 1 and curve[-1][0] >= 600, path
    assert _has_drawn_pixels(out / "e6_learning_curves.png")
    # resuming reuses the trained models and every finished episode
    again = reproduce(
        out,
        experiments=["E6", "E7"],
        train_timesteps=600,
        curves=str(corpus),
        resume=True,
        **{**TINY, "learned": None, "real_curves": None},
    )
    assert again.ran == 0 and again.reused == res.ran


def test_cli_reproduce_and_benchmark(tmp_path: Path, capsys) -> None:
    code = main(
        [
            "reproduce",
            "--seeds",
            "2",
            "--n-jobs",
            "10",
            "--experiments",
            "E1",
            "--workers",
            "1",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "E1" in out and "EvalStop" in out and (tmp_path / "REPORT.md").exists()
    assert (
        main(
            ["benchmark", "--seeds", "2", "--workers", "1", "--n-jobs", "10", "--scheduler", "fifo"]
        )
        == 0
    )
    assert "LossPlateau" in capsys.readouterr().out
    assert main(["reproduce", "--seeds", "1", "--out", str(tmp_path / "x")]) == 2
    assert "seeds=1" in capsys.readouterr().err
