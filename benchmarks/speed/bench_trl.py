"""Seconds per TRL run and the hacking fraction (issue 12).

Runs ``--runs`` runs of the TRL corpus grid (default 2), interleaved with micro-RLHF runs as
the reference measured in the same process, and prints process CPU seconds per run (min and
median), the ratio TRL / micro-RLHF, and the hacking fraction of these runs and of the shipped
corpus. Needs the ``trl`` extra. The shared base LM is built once into ``--out/base`` (its
cost is printed apart: a corpus pays it once).

    HF_HUB_OFFLINE=1 python benchmarks/speed/bench_trl.py [--runs 2] [--out /tmp/bench_trl]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def main() -> None:
    """Time the runs and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", default="/tmp/bench_trl")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from evalstop_corpora.micro_rlhf import MicroRLHFConfig, run_micro_rlhf
    from evalstop_corpora.trl.generate import run_spec, trl_specs
    from evalstop_corpora.trl.world import build_base
    from evalstop_gym.corpus.packaged import TRL_CORPUS, load_corpus

    torch.set_num_threads(1)
    started = time.process_time()
    base = str(build_base(os.path.join(args.out, "base")))
    print(
        f"base LM ready: {time.process_time() - started:.1f} CPU s (built once per corpus, reused if present)"
    )
    trl_s, micro_s, labels = [], [], []
    for i, spec in enumerate(trl_specs(args.runs, seed=99)):
        t0 = time.process_time()
        run_micro_rlhf(MicroRLHFConfig(seed=i))
        micro_s.append(time.process_time() - t0)
        # A fresh folder per measurement: a finished folder would be reused, not rerun.
        trace, seconds, reused = run_spec(
            spec, base, os.path.join(args.out, f"runs-{time.time_ns()}")
        )
        assert not reused
        trl_s.append(seconds)
        labels.append(bool(trace.label))
    corpus = load_corpus(TRL_CORPUS)
    ratio = statistics.median(trl_s) / statistics.median(micro_s)
    print(
        f"TRL run: min {min(trl_s):.1f} s, median {statistics.median(trl_s):.1f} s CPU "
        f"({args.runs} runs); micro-RLHF reference median {statistics.median(micro_s):.2f} s; "
        f"ratio {ratio:.1f}x"
    )
    print(f"hacking in these runs: {sum(labels)}/{len(labels)}")
    frac = np.mean([bool(t.label) for t in corpus])
    print(f"hacking in the shipped corpus: {100 * frac:.1f}% of {len(corpus)} runs")


if __name__ == "__main__":
    main()
