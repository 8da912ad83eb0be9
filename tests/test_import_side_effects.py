"""Importing (and plotting with) the harness leaves matplotlib, os.environ and RNGs alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("matplotlib")

MODULES = (
    "evalstop_gym",
    "evalstop_gym.parallel",
    "baselines",
    "evalstop_experiments.cells",
    "evalstop_experiments.experiments",
    "evalstop_experiments.runner",
    "evalstop_experiments.report",
    "evalstop_experiments.plots",
    "evalstop_experiments.reproduce",
    "evalstop_experiments.experiments.learned",
    "evalstop_experiments.experiments.real_curves",
    "evalstop_cli.main",
    "evalstop_corpora.micro_rlhf.generate",
)

SCRIPT = textwrap.dedent(
    """
    import importlib, os, random, sys, tempfile
    from pathlib import Path
    import matplotlib
    matplotlib.use("svg")  # what a user (or a notebook) chose before importing us
    import numpy as np
    env, np_state, py_state = dict(os.environ), np.random.get_state()[1].copy(), random.getstate()
    for name in sys.argv[1:]:
        importlib.import_module(name)
    assert matplotlib.get_backend() == "svg", ("import", matplotlib.get_backend())
    assert dict(os.environ) == env, "an import changed os.environ"
    assert (np.random.get_state()[1] == np_state).all() and random.getstate() == py_state
    # Drawing the report's figures does not switch the backend either.
    from evalstop_experiments.plots import plot_example_curves
    from evalstop_experiments.plots import plot_learning_curves
    out = Path(tempfile.mkdtemp())
    plot_example_curves({"n_jobs": 12}, 0, out / "a.png")
    plot_learning_curves({"x": [(1, 0.5, 0.1), (2, 0.7, 0.1)]}, out / "b.png")
    assert (out / "a.png").read_bytes()[:4] == b"\\x89PNG"
    assert matplotlib.get_backend() == "svg", ("plot", matplotlib.get_backend())
    print("clean")
    """
)


def test_imports_and_plots_keep_the_users_matplotlib_backend() -> None:
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, *MODULES], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "clean"


@pytest.mark.parametrize(
    ("package", "never"),
    [
        (
            "evalstop_gym",
            ("baselines", "evalstop_corpora", "evalstop_experiments", "evalstop_cli", "torch"),
        ),
        ("baselines.training", ("evalstop_experiments", "evalstop_cli", "torch")),
        ("evalstop_experiments.reproduce", ("evalstop_cli", "torch")),
    ],
)
def test_dependencies_go_one_way(package: str, never: tuple[str, ...]) -> None:
    code = (
        f"import sys, {package}; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({never!r})))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_the_cli_parses_without_importing_scipy() -> None:
    """scipy.stats costs about 1.5 s of CPU to import: a ``--help`` or a bad flag must not pay it."""
    script = textwrap.dedent(
        """
        import contextlib, io, sys
        from evalstop_cli.main import main
        for argv in (["benchmark", "--help"], ["reproduce", "--help"], ["curves", "--help"]):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
                main(argv)
        assert not [m for m in sys.modules if m.split(".")[0] == "scipy"], "scipy imported"
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
