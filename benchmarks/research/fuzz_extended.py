"""The extended fuzz at scale: hostile configs through every entry point, raw exceptions counted.

    python benchmarks/research/fuzz_extended.py [--configs 5000] [--start 0]

Each config is :func:`test_fuzz_extended.trial` of one seed (tests/envs): a
target among EvalStopFlat-v0, EvalStopCluster-v0, the vector env, pools,
costs, deprioritise, ``SimConfig`` and ``Simulator`` directly, mostly valid
arguments with up to two hostile values (wrong types, NaN, inf, huge,
negative, unicode, NumPy scalars), then an episode with occasional hostile
actions.  Printed: how many configs ran an episode, how many raised the
package's errors, and the raw exceptions (and invariant failures) by kind,
with the first seed of each (replay it with ``trial(seed)``).  Runs this
checkout's package whatever is installed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "envs")]  # this checkout's package, then the fuzz

from test_fuzz_extended import RAN, REFUSED, outcome  # noqa: E402


def main() -> None:
    """Run the configs and print the counts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=5000)
    ap.add_argument("--start", type=int, default=0, help="first seed")
    args = ap.parse_args()
    raw: Counter[str] = Counter()
    first: dict[str, int] = {}
    ran = refused = 0
    t0 = time.process_time()
    for seed in range(args.start, args.start + args.configs):
        kind = outcome(seed)
        if kind == RAN:
            ran += 1
        elif kind == REFUSED:
            refused += 1
        else:
            raw[kind] += 1
            first.setdefault(kind, seed)
    cpu = time.process_time() - t0
    print(f"{args.configs} configs in {cpu:.0f} CPU s: {ran} ran an episode, {refused} refused")
    print(f"raw exceptions: {sum(raw.values())}")
    for kind, n in raw.most_common():
        print(f"  {n:5d}  {kind}  (first seed {first[kind]})")


if __name__ == "__main__":
    main()
