"""The detection figures each named calibration yields (for docs/CALIBRATION.md).

    python benchmarks/research/calibration_table.py [--seeds 20]

EvalStop(k=2) through the simulator's own rule, on the heavy-RLHF workload,
SRTF-Est, 200 jobs per episode; mean over seeds.
"""

from __future__ import annotations

import argparse

import numpy as np

from evalstop_gym import CALIBRATIONS, KDeclineRule, SimConfig, Simulator


def main() -> None:
    """Print the detection table of every calibration over a sweep of eval noise."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    print("| calibration | evals/job | σ | recall | FPR | precision | ΔJCT % | Δwaste % |")
    print("|---|---|---|---|---|---|---|---|")
    for name, cal in CALIBRATIONS.items():
        for sigma in (0.01, 0.02, 0.05, 0.08, 0.12):
            rows = []
            for seed in range(args.seeds):
                cfg = SimConfig(calibration=name, eval_noise=sigma)
                base = Simulator(cfg, seed).run()
                m = Simulator(cfg, seed).run(KDeclineRule(2))
                m["d_jct"] = 100 * (m["mean_jct_h"] / base["mean_jct_h"] - 1)
                m["d_waste"] = 100 * (m["wasted_gpu_hours"] / base["wasted_gpu_hours"] - 1)
                rows.append(m)

            def avg(k: str, rows=rows) -> float:
                return float(np.nanmean([r[k] for r in rows]))

            print(
                f"| {name} | {cal.evals_per_job} | {sigma} | {avg('recall'):.3f} | {avg('fpr'):.3f} | "
                f"{avg('precision'):.3f} | {avg('d_jct'):.1f} | {avg('d_waste'):.1f} |"
            )


if __name__ == "__main__":
    main()
