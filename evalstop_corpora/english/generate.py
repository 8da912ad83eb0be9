"""Generate a corpus of English RLHF runs: one folder per run, TRL's own logs, then the JSONL.

Command line (``evalstop-gym curves generate --source english``)::

    evalstop-gym curves generate --source english --runs 216 --out DIR [--seed 0] [--quick]
                                 [--workers 1] [--backend local|ray] [--address HOST:PORT]

writes ``DIR/base/`` (tokenizer, pre-trained policy and the proxy reward models, each built
once, keyed by the SHA-256 of its recipe and reused), ``DIR/runs/<run_id>/`` (TRL's
``trainer_state.json`` with the gold records in its ``log_history``, then ``run_config.json``
last) and ``DIR/traces.jsonl``, which :func:`build_corpus` makes from the run folders with the
package's loader. A run folder without ``run_config.json`` (a killed run) is redone; a finished
one is read, never rerun, so the same command resumes an interrupted corpus.

Sweep grid (:data:`ENGLISH_GRID`, 3 x 3 x 4 = 36 cells): the trainer (GRPO, RLOO, online
DPO), its KL level (``beta`` from :data:`BETAS`, per trainer: DPO's beta is on another scale),
and the proxy variant (:data:`~.proxy.PROXY_VARIANTS`). Run ``i`` of a corpus with seed ``S``
takes cell ``perm[i % 36]`` of a permutation drawn from ``S`` and run seed ``S * 100_000 + i``
(:func:`evalstop_corpora.grid.grid_runs`): 108 runs give every cell 3 seeds, 216 give 6.

Labels: a run *hacks* when its gold curve (``eval_gold``, the mean over ``gold_batch``
completions) peaks at most 90 % into the run and then falls by at least 20 % of its range and
by more than its measured noise, ``2 * sqrt(2)`` times the median standard error of a gold
point (:func:`evalstop_gym.corpus.label_hacking` with ``min_abs_drop``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_corpora import generate_and_report
from evalstop_corpora.grid import grid_runs
from evalstop_gym.corpus.analysis import NOISE_MULTIPLE
from evalstop_gym.corpus.format import CurveTrace, write_traces
from evalstop_gym.parallel import Executor

#: The swept dimensions: trainer, KL level (an index into :data:`BETAS`), proxy variant.
ENGLISH_GRID: dict[str, tuple[Any, ...]] = {
    "trainer": ("grpo", "rloo", "online_dpo"),
    "kl_level": (0, 1, 2),
    "proxy": ("mean400", "mean100", "small400", "rater400"),
}
#: Each trainer's KL coefficient at each KL level (none, weak, strong).
BETAS: dict[str, tuple[float, float, float]] = {
    "grpo": (0.0, 0.02, 0.1),
    "rloo": (0.0, 0.02, 0.1),
    "online_dpo": (0.01, 0.05, 0.2),
}
#: Settings of the quick corpus (tests, ``reproduce --quick``): short, cheap runs.
QUICK_OVERRIDES: dict[str, Any] = {
    "steps": 20,
    "eval_every": 2,
    "gold_batch": 64,
    "eval_batch": 16,
    "prompts_per_step": 4,
    "num_generations": 4,
}
#: File of a run folder recording the process CPU seconds the run took.
CPU_FILE = "cpu_seconds.json"
#: File name of the corpus inside the ``--out`` folder.
TRACES_FILE = "traces.jsonl"
#: Keys of :func:`~evalstop_gym.corpus.load_trl_trainer_state` that read a run's log.
LOADER_KEYS: dict[str, str] = {
    "eval_key": "eval_reward",
    "loss_key": "loss",
    "proxy_key": "eval_proxy",
    "kl_key": "eval_kl",
    "gold_key": "eval_gold",
}


def english_specs(n_runs: int, seed: int = 0, **overrides: Any) -> list[Any]:
    """The run configurations of a corpus of ``n_runs`` runs over :data:`ENGLISH_GRID`.

    Args:
        n_runs: Number of runs (>= 0).
        seed: Corpus seed (cell order and run seeds).
        **overrides: :class:`~.run.EnglishRunConfig` fields, the same for every run.

    Returns:
        One :class:`~.run.EnglishRunConfig` per run, in run order.
    """
    from evalstop_corpora.english.run import EnglishRunConfig

    out = []
    for run_seed, fields in grid_runs(ENGLISH_GRID, n_runs, seed, overrides):
        level = fields.pop("kl_level")
        fields.setdefault("beta", BETAS[fields["trainer"]][level])
        out.append(EnglishRunConfig(seed=run_seed, **fields))
    return out


def build_world(base: str | os.PathLike[str], proxies: Sequence[str]) -> tuple[str, dict[str, str]]:
    """Build (or reuse) the policy and the named proxies under ``base``; their folders."""
    from evalstop_corpora.english.policy import build_policy
    from evalstop_corpora.english.proxy import build_proxy

    policy = build_policy(base)
    return str(policy), {p: str(build_proxy(base, policy, p)) for p in sorted(set(proxies))}


def run_finished(out: Path, spec: Any) -> bool:
    """Whether ``out`` holds the finished run of ``spec`` (its config is written last)."""
    saved = out / "run_config.json"
    return (
        (out / "trainer_state.json").exists()
        and saved.exists()
        and json.loads(saved.read_text(encoding="utf-8")) == asdict(spec)
    )


def run_spec(spec: Any, policy: str, proxies: dict[str, str], runs_dir: str) -> tuple[float, bool]:
    """Worker body: one run (unless finished); its CPU seconds and whether it was reused."""
    from evalstop_corpora.english.run import run_english

    out = Path(runs_dir) / spec.run_id()
    if run_finished(out, spec):
        return 0.0, True
    shutil.rmtree(out, ignore_errors=True)  # a killed run starts again from scratch
    started = time.process_time()
    run_english(spec, policy, proxies[spec.proxy], out)
    seconds = time.process_time() - started
    # For the corpus's cost figures; not part of the run's identity (run_config.json is).
    (out / CPU_FILE).write_text(json.dumps({"cpu_seconds": seconds}) + "\n", encoding="utf-8")
    return seconds, False


def _run_item(item: tuple[Any, str, dict[str, str], str]) -> tuple[float, bool]:
    """:func:`run_spec` on one item (executors map one argument)."""
    return run_spec(*item)


def trace_of(run: str | os.PathLike[str]) -> CurveTrace:
    """The trace of one finished run folder, read by the package's TRL loader, labelled.

    ``meta`` carries the run's configuration, the trainer's class, ``eval_noise_sd`` (median
    over checkpoints of ``eval_reward_sd``: the sd of the ``eval_batch``-sample score) and
    ``gold_noise_sd`` (median standard error of a gold point).  Both medians skip the
    checkpoints whose every sample scored the same (a policy collapsed onto one completion
    measures no spread there): the run's noise is the noise of a measurement where its
    policy still varies, and a run that collapses early is not labelled by a zero noise.
    """
    from evalstop_corpora.english.run import TRAINERS
    from evalstop_gym.corpus.analysis import label_hacking
    from evalstop_gym.corpus.loaders import load_trl_trainer_state

    run = Path(run)
    config = json.loads((run / "run_config.json").read_text(encoding="utf-8"))
    state = run / "trainer_state.json"
    trace = load_trl_trainer_state(state, run_id=run.name, **LOADER_KEYS)
    history = json.loads(state.read_text(encoding="utf-8"))["log_history"]
    noise = [e["eval_reward_sd"] for e in history if e.get("eval_reward_sd", 0) > 0]
    se = [e["eval_gold_se"] for e in history if e.get("eval_gold_se", 0) > 0]
    gold_se = float(np.median(se)) if se else 0.0
    meta = {
        "source": "english",
        "trainer_class": TRAINERS[config["trainer"]],
        **config,
        "eval_noise_sd": float(np.median(noise)) if noise else None,
        "gold_noise_sd": gold_se,
    }
    assert trace.gold is not None
    label = label_hacking(trace.gold, min_abs_drop=NOISE_MULTIPLE * gold_se)
    return dataclasses.replace(trace, label=label, meta=meta)


def build_corpus(run_dir: str | os.PathLike[str]) -> list[CurveTrace]:
    """Every finished run under ``run_dir`` (folders with ``run_config.json``), by folder name."""
    runs = sorted(p for p in Path(run_dir).iterdir() if (p / "run_config.json").exists())
    return [trace_of(p) for p in runs]


def generate_english_corpus(
    specs: Sequence[Any],
    out_dir: str | os.PathLike[str],
    *,
    workers: int | None = None,
    backend: str = "local",
    address: str | None = None,
    progress: bool = True,
    timings: list[float] | None = None,
    executor: Executor | None = None,
) -> list[CurveTrace]:
    """Run (or resume) a corpus of English runs and write ``out_dir/traces.jsonl``.

    Args:
        specs: Run configurations (:func:`english_specs`).
        out_dir: Output folder (``base/``, ``runs/<run_id>/``, :data:`TRACES_FILE`).
        workers: Parallel processes or Ray CPUs; default: all cores.
        backend: ``"local"`` or ``"ray"``.
        address: Address of an existing Ray cluster (Ray backend only).
        progress: Show a progress bar.
        timings: If given, receives the CPU seconds of each run trained now (reused runs are
            left out), in spec order.
        executor: The executor to run on (default: one from ``backend``, ``workers``,
            ``address``).

    Returns:
        The traces of the specs' runs, in spec order.
    """
    from tqdm.auto import tqdm

    if not specs:
        raise ValueError("nothing to run: at least one run is needed")
    executor = executor or Executor(backend, workers, address)
    out = Path(out_dir)
    policy, proxies = build_world(out / "base", [s.proxy for s in specs])
    items = [(spec, policy, proxies, str(out / "runs")) for spec in specs]
    with tqdm(total=len(specs), disable=not progress, desc=f"English ({executor.backend})") as bar:
        results = executor.map(_run_item, items, progress=bar.update)
    if timings is not None:
        timings.extend(seconds for seconds, reused in results if not reused)
    traces = [trace_of(out / "runs" / s.run_id()) for s in specs]
    write_traces(traces, out / TRACES_FILE)
    return traces


def run_cli(args: Any) -> int:
    """Execute ``curves generate --source english`` from parsed arguments; print the summary."""
    from evalstop_gym.errors import ConfigError

    if args.runs < 1:
        raise ConfigError("--runs", args.runs, "an integer >= 1")
    specs = english_specs(args.runs, args.seed, **(QUICK_OVERRIDES if args.quick else {}))
    make = functools.partial(generate_english_corpus, specs, args.out)
    return generate_and_report(make, args, Path(args.out) / TRACES_FILE, "English runs")


def ship_corpus(
    out_dir: str | os.PathLike[str], name: str, command: str, seed: int, **extra: Any
) -> Path:
    """Write the finished runs of ``out_dir/runs`` as the packaged corpus ``name`` with its sidecar.

    The sidecar records the command, seed, run and hacking counts, the versions of TRL,
    transformers, tokenizers, torch and vaderSentiment, ``extra`` fields, and the SHA-256 that
    :func:`evalstop_gym.corpus.packaged.load_corpus` checks.
    """
    from importlib.metadata import version

    from evalstop_gym.corpus.packaged import DATA_DIR, write_sidecar

    traces = build_corpus(Path(out_dir) / "runs")
    dest = DATA_DIR / f"{name}.jsonl"
    write_traces(traces, dest)
    write_sidecar(
        dest,
        command=command,
        seed=seed,
        runs=len(traces),
        hacking=sum(bool(t.label) for t in traces),
        versions={
            p: version(p) for p in ("trl", "transformers", "tokenizers", "torch", "vaderSentiment")
        },
        **extra,
    )
    return dest


__all__ = [
    "BETAS",
    "ENGLISH_GRID",
    "LOADER_KEYS",
    "QUICK_OVERRIDES",
    "TRACES_FILE",
    "build_corpus",
    "build_world",
    "english_specs",
    "generate_english_corpus",
    "run_cli",
    "ship_corpus",
    "trace_of",
]
