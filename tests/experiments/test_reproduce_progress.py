"""reproduce's progress lines (also piped), per-experiment timings, shared episodes, quick data."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

# The harness's statistics need SciPy (the cli extra); a core install has none.
pytest.importorskip("scipy")

from evalstop_experiments.experiments.paper import build_cells
from evalstop_experiments.experiments.real_curves import QUICK_CORPUS
from evalstop_experiments.progress import Reporter
from evalstop_experiments.reproduce import reproduce
from evalstop_experiments.runner import episode_key, run_task, run_tasks, task_path
from evalstop_gym.parallel import Executor

TINY = {
    "seeds": 2,
    "n_jobs": 12,
    "workers": 1,
    "learned": False,
    "real_curves": False,
    "deprioritisation": False,
}
DONE = re.compile(r"^\[(?P<exp>[^\]]+)\] done: (?P<rest>.*)$")


@pytest.fixture
def piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """No environment variable that makes rich treat a pipe as a terminal."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)


def _done_lines(text: str) -> Counter[str]:
    return Counter(m["exp"] for line in text.splitlines() if (m := DONE.match(line)))


@pytest.mark.slow
def test_piped_output_has_one_completion_line_per_experiment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], piped: None
) -> None:
    res = reproduce(tmp_path, experiments=["E1", "E5", "E8"], progress=True, **TINY)
    out = capsys.readouterr().out
    assert _done_lines(out) == Counter({"E1": 1, "E5": 1, "E8": 1})
    assert "\x1b" not in out and "\r" not in out  # no bars, no escape codes
    assert re.search(r"^\[E1\] done: 4/4 cells × 2 seeds in \d+\.\d s \(\d+\.\d s CPU\)", out, re.M)
    # every experiment's time is recorded and shown
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert {t["experiment"] for t in timings["experiments"]} == {"E1", "E5", "E8"}
    assert {t.experiment for t in res.timings} == {"E1", "E5", "E8"}
    report = (tmp_path / "REPORT.md").read_text()
    section = report.split("## Timing")[1].split("\n## ")[0]
    for exp in ("E1", "E5", "E8"):
        row = next(r for r in section.splitlines() if r.startswith(f"| {exp} |"))
        wall, cpu = row.split("|")[5:7]
        assert float(wall) >= 0.0 and float(cpu) >= 0.0, row
    assert "whole run" in section and "load average" in section


def test_resumed_run_marks_reused_experiments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], piped: None
) -> None:
    reproduce(tmp_path, experiments=["E1", "E2"], progress=False, **TINY)
    (tmp_path / "raw" / "E2").rename(tmp_path / "E2_moved")  # E2 reruns, E1 is reused
    res = reproduce(tmp_path, experiments=["E1", "E2"], progress=True, resume=True, **TINY)
    lines = capsys.readouterr().out
    assert _done_lines(lines) == Counter({"E1": 1, "E2": 1})
    assert re.search(r"^\[E1\] done: .*reused from an earlier run \(not timed\)$", lines, re.M)
    assert not re.search(r"^\[E2\] done: .*reused", lines, re.M)
    by_exp = {t.experiment: t for t in res.timings}
    assert by_exp["E1"].all_reused and by_exp["E1"].reused == 8 and by_exp["E1"].ran == 0
    assert not by_exp["E2"].all_reused and by_exp["E2"].ran == 20
    section = (tmp_path / "REPORT.md").read_text().split("## Timing")[1]
    assert re.search(r"^\| E1 \| 4 × 2 \| 0 \| 8 \| reused \| – \|", section, re.M)
    assert re.search(r"^\| E2 \| 10 × 2 \| 20 \| 0 \| \d+\.\d \| \d+\.\d \|", section, re.M)


def test_progress_off_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reproduce(tmp_path, experiments=["E1"], progress=False, **TINY)
    assert capsys.readouterr().out == ""


def test_a_pipe_gets_plain_lines_and_a_forced_terminal_gets_bars(
    monkeypatch: pytest.MonkeyPatch, piped: None
) -> None:
    plain = Reporter(stream=io.StringIO())
    assert not plain.terminal
    with plain.bars({"E1": 2}) as advance:
        advance("E1", 2)
        plain.line("[E1] done: x")
    assert plain.stream.getvalue() == "[E1] done: x\n"
    monkeypatch.setenv("FORCE_COLOR", "1")
    drawn = Reporter(stream=io.StringIO())
    assert drawn.terminal
    with drawn.bars({"E1": 2}) as advance:
        advance("E1", 2)
        drawn.line("[E1] done: x")
    assert "[E1] done: x" in drawn.stream.getvalue() and "2/2" in drawn.stream.getvalue()


def test_shared_episodes_are_simulated_once_and_written_as_run_task_writes_them(
    tmp_path: Path,
) -> None:
    cells = build_cells({"n_jobs": 12}, ["E1", "E2", "E5"])
    tasks = [(c, s) for c in cells for s in range(2)]
    distinct = len({episode_key(t) for t in tasks})
    assert distinct < len(tasks)  # E1's NoStop and EvalStop are E2's srtf-est and E5's k=2
    st = run_tasks(tasks, tmp_path, executor=Executor(workers=1))
    assert st.ran == len(tasks) and st.simulated == distinct
    for task in tasks:
        expected = json.dumps(run_task(task), sort_keys=True, allow_nan=True)
        assert task_path(tmp_path, *task).read_text(encoding="utf-8") == expected


@pytest.mark.slow
def test_background_stages_give_the_same_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], piped: None
) -> None:
    """E8 beside the episodes (two workers) writes what it writes in line (one worker)."""
    a, b = tmp_path / "inline", tmp_path / "beside"
    reproduce(a, experiments=["E1", "E8"], progress=False, **TINY)
    res = reproduce(b, experiments=["E1", "E8"], progress=True, **{**TINY, "workers": 2})
    assert {t.experiment: t.background for t in res.timings}["E8"]
    out = capsys.readouterr().out
    assert _done_lines(out) == Counter({"E1": 1, "E8": 1})
    assert re.search(r"^\[E8\] done: suite in .*beside the other work\)$", out, re.M)
    for name in ("E8.csv", "E8.md", "E1.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_quick_corpus_is_shipped_hash_checked(tmp_path: Path) -> None:
    from evalstop_experiments.experiments import real_curves as e7
    from evalstop_experiments.plan import Plan, ReproduceOptions
    from evalstop_gym.corpus.packaged import load_corpus, sidecar

    traces = load_corpus(QUICK_CORPUS)
    assert len(traces) == sidecar(QUICK_CORPUS)["runs"] == e7.CORPUS_RUNS["quick"]
    plan = Plan()
    e7.EXPERIMENT.build(tmp_path, ReproduceOptions(quick=True, workers=1), plan)
    assert e7.corpus_file(tmp_path, quick=True).exists()  # copied, not generated
    assert {c.experiment for c in plan.cells} == {"E7"}
    assert "shipped with the package" in plan.header["E7 corpus"]


@pytest.mark.slow
def test_quick_corpus_is_what_the_generator_makes() -> None:
    """Its first run regenerated from its recorded seed gives the shipped trace.

    Bit for bit on a CPU like the one that wrote it (Intel, AVX-512); elsewhere torch's
    float32 kernels differ in the last bits (seen: 1e-7 on the evals, 1e-6 on the loss,
    with AVX2 and on an AMD EPYC with AVX-512), so the run must match to float32
    precision, with the same steps, label and metadata.
    """
    pytest.importorskip("torch")
    from golden_episodes import float_kernels

    from evalstop_corpora.micro_rlhf.generate import _run_one, sweep_configs
    from evalstop_gym.corpus.packaged import load_corpus, sidecar

    meta = sidecar(QUICK_CORPUS)
    config = sweep_configs(meta["runs"], meta["seed"])[0]
    trace, _ = _run_one(config)
    shipped = load_corpus(QUICK_CORPUS)[0]
    if float_kernels() == "avx512" and _cpu_vendor() == "GenuineIntel":
        assert trace == shipped
        return
    assert (trace.run_id, trace.label, trace.meta) == (shipped.run_id, shipped.label, shipped.meta)
    np.testing.assert_array_equal(trace.step, shipped.step)
    for name in ("eval", "loss", "proxy", "kl", "gold"):
        got, want = getattr(trace, name), getattr(shipped, name)
        assert (got is None) == (want is None), name
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, err_msg=name)


def _cpu_vendor() -> str:
    """The CPU's vendor id (``GenuineIntel``, ``AuthenticAMD``; "" where /proc has none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""
