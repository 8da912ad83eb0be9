"""The paper's scripted stoppers, side by side, on the same seeds.

python examples/compare_stoppers.py
"""

import numpy as np

from baselines import EvalStop, LossPlateau, NoStop, StopAtProgress, evaluate

SEEDS = range(8)
ENV = {"workload": "heavy-rlhf", "scheduler": "srtf-est", "eval_noise": 0.02}

base = evaluate(NoStop(), SEEDS, **ENV)
print(f"{'policy':14s} {'ΔJCT %':>8s} {'Δwaste %':>9s} {'prec':>6s} {'recall':>7s} {'FPR':>6s}")
for policy in (
    NoStop(),
    EvalStop(k=2),
    StopAtProgress(0.65),
    LossPlateau(window=3, tolerance=0.02),
):
    rows = evaluate(policy, SEEDS, **ENV)
    d_jct = np.mean([100 * (r["mean_jct_h"] / b["mean_jct_h"] - 1) for r, b in zip(rows, base)])
    d_w = np.mean(
        [100 * (r["wasted_gpu_hours"] / b["wasted_gpu_hours"] - 1) for r, b in zip(rows, base)]
    )
    prec = np.nanmean([r["precision"] for r in rows]) if policy.name != "NoStop" else float("nan")
    print(
        f"{policy.name:14s} {d_jct:8.1f} {d_w:9.1f} {prec:6.3f} "
        f"{np.mean([r['recall'] for r in rows]):7.3f} {np.mean([r['fpr'] for r in rows]):6.3f}"
    )
