"""Generate a corpus of TRL runs: one output folder per run plus the corpus JSONL.

Command line (``evalstop-gym curves generate --source trl``)::

    evalstop-gym curves generate --source trl --runs 48 --out runs/trl [--seed 0] [--quick]
                                 [--workers 2] [--backend local|ray] [--address HOST:PORT]

writes ``OUT/base/`` (tokenizer and pre-trained base LM, built once, shared by every run),
``OUT/runs/<run_id>/trainer_state.json`` (TRL's own log) and ``OUT/traces.jsonl``. A run whose
folder already holds a ``trainer_state.json`` of the same configuration is read, not rerun, so
an interrupted corpus resumes where it stopped.

Sweep grid (:data:`TRL_GRID`, 4 x 3 x 2 x 2 = 48 cells): GRPO's KL coefficient ``beta`` in
{0, 0.05, 0.2, 0.5}, preference pairs ``n_pairs`` in {128, 512, 2048}, proxy width
``proxy_hidden`` in {0 (linear), 32}, policy learning rate ``lr`` in {1.5e-4, 3e-4}. Run ``i`` of
a corpus with seed ``S`` takes cell ``perm[i % 48]`` of a permutation drawn from ``S`` and run
seed ``S * 100_000 + i`` (:func:`evalstop_corpora.grid.grid_runs`): 48 runs cover the grid once.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evalstop_corpora import generate_and_report
from evalstop_corpora.grid import grid_runs
from evalstop_gym.corpus.format import CurveTrace, write_traces
from evalstop_gym.parallel import Executor

#: The swept hyperparameters and their values (see module docstring).
TRL_GRID: dict[str, tuple[int, ...] | tuple[float, ...]] = {
    "beta": (0.0, 0.05, 0.2, 0.5),
    "n_pairs": (128, 512, 2048),
    "proxy_hidden": (0, 32),
    "lr": (1.5e-4, 3e-4),
}
#: Overrides of the ``--quick`` corpus (CI and ``reproduce --quick``): half the steps at twice
#: the larger learning rate of the grid, so that quick runs still reach (or pass) the gold peak.
QUICK_OVERRIDES: dict[str, Any] = {"steps": 32, "eval_every": 2, "gold_batch": 256, "lr": 6e-4}
#: File name of the corpus inside the ``--out`` folder.
TRACES_FILE = "traces.jsonl"


def trl_specs(n_runs: int, seed: int = 0, **overrides: Any) -> list[Any]:
    """The run configurations of a corpus of ``n_runs`` runs over :data:`TRL_GRID`.

    Args:
        n_runs: Number of runs (>= 0).
        seed: Corpus seed (cell order and run seeds).
        **overrides: :class:`~.run.TRLRunConfig` fields, the same for every run (a swept
            field given here replaces the grid's value: :func:`~evalstop_corpora.grid.grid_runs`).

    Returns:
        One :class:`~.run.TRLRunConfig` per run, in run order.
    """
    from evalstop_corpora.trl.run import TRLRunConfig

    runs = grid_runs(TRL_GRID, n_runs, seed, overrides)
    return [TRLRunConfig(seed=run_seed, **fields) for run_seed, fields in runs]


def run_spec(spec: Any, base_dir: str, runs_dir: str) -> tuple[CurveTrace, float, bool]:
    """Worker body: one run (or its finished folder), its CPU seconds, and whether it was reused.

    Args:
        spec: A :class:`~.run.TRLRunConfig`.
        base_dir: The shared base folder.
        runs_dir: Parent of the run folders.

    Returns:
        ``(trace, process CPU seconds, reused)``.
    """
    from evalstop_corpora.trl.run import run_trl, trace_of

    out = Path(runs_dir) / spec.run_id()
    state, saved = out / "trainer_state.json", out / "run_config.json"
    if state.exists() and saved.exists() and json.loads(saved.read_text()) == asdict(spec):
        return trace_of(state, spec), 0.0, True
    started = time.process_time()
    trace = run_trl(spec, base_dir, out)
    return trace, time.process_time() - started, False


def _run_item(item: tuple[Any, str, str]) -> tuple[CurveTrace, float, bool]:
    """:func:`run_spec` on one ``(spec, base_dir, runs_dir)`` item (executors map one argument)."""
    return run_spec(*item)


def generate_trl_corpus(
    specs: Sequence[Any],
    out_dir: str | os.PathLike[str],
    *,
    workers: int | None = None,
    backend: str = "local",
    address: str | None = None,
    progress: bool = True,
    base_recipe: Any = None,
    timings: list[float] | None = None,
    executor: Executor | None = None,
) -> list[CurveTrace]:
    """Run (or resume) a corpus of TRL runs and write ``out_dir/traces.jsonl``.

    Args:
        specs: Run configurations (:func:`trl_specs`).
        out_dir: Output folder (``base/``, ``runs/<run_id>/``, :data:`TRACES_FILE`).
        workers: Parallel processes or Ray CPUs; default: all cores.
        backend: ``"local"`` or ``"ray"``.
        address: Address of an existing Ray cluster (Ray backend only).
        progress: Show a progress bar.
        base_recipe: :class:`~.world.BaseRecipe` of the shared base LM (default recipe if None).
        timings: If given, receives the CPU seconds of each run that was trained (reused runs
            are left out), in spec order.
        executor: The :class:`~evalstop_gym.parallel.Executor` to run on (default: one built
            from ``backend``, ``workers`` and ``address``); its workers run with one thread.

    Returns:
        The traces in spec order.
    """
    from tqdm.auto import tqdm

    from evalstop_corpora.trl.world import build_base

    executor = executor or Executor(backend, workers, address)
    if not specs:
        raise ValueError("nothing to run: at least one run is needed")
    out = Path(out_dir)
    base = str(build_base(out / "base", base_recipe))
    items = [(spec, base, str(out / "runs")) for spec in specs]
    with tqdm(total=len(specs), disable=not progress, desc=f"TRL ({executor.backend})") as bar:
        results = executor.map(_run_item, items, progress=bar.update)
    if timings is not None:
        timings.extend(seconds for _, seconds, reused in results if not reused)
    traces = [trace for trace, _, _ in results]
    write_traces(traces, out / TRACES_FILE)
    return traces


def run_cli(args: Any) -> int:
    """Execute ``curves generate --source trl`` from parsed arguments; print the corpus figures.

    Args:
        args: Namespace with ``runs``, ``out``, ``seed``, ``quick``, ``workers``, ``backend``,
            ``address`` and ``no_progress``.

    Returns:
        Process exit status (0 on success).
    """
    overrides = QUICK_OVERRIDES if args.quick else {}
    specs = trl_specs(args.runs, args.seed, **overrides)
    make = functools.partial(generate_trl_corpus, specs, args.out)
    return generate_and_report(make, args, Path(args.out) / TRACES_FILE, "TRL runs")


def ship_corpus(out_dir: str | os.PathLike[str], name: str, command: str, seed: int) -> Path:
    """Copy ``out_dir/traces.jsonl`` into the package data as ``name`` with its sidecar.

    The sidecar records the command, seed, run and hacking counts, the versions of TRL,
    transformers, tokenizers and torch, and the SHA-256 that
    :func:`evalstop_gym.corpus.packaged.load_corpus` checks.

    Returns:
        The shipped JSONL path.
    """
    import shutil
    from importlib.metadata import version

    from evalstop_gym.corpus.format import read_traces
    from evalstop_gym.corpus.packaged import DATA_DIR, write_sidecar

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    dest = DATA_DIR / f"{name}.jsonl"
    shutil.copyfile(Path(out_dir) / TRACES_FILE, dest)
    traces = read_traces(dest)
    write_sidecar(
        dest,
        command=command,
        seed=seed,
        runs=len(traces),
        hacking=sum(bool(t.label) for t in traces),
        versions={p: version(p) for p in ("trl", "transformers", "tokenizers", "torch")},
    )
    return dest
