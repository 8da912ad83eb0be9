"""``EvalStop-v0``'s frames, without dependencies: a text view and a small RGB picture."""

from __future__ import annotations

import numpy as np

from ..sim.engine import Simulator
from ..sim.workloads import JOB_TYPES


def ansi_frame(sim: Simulator | None) -> str:
    """The cluster's GPUs, its job counts and the job being decided, as text lines."""
    if sim is None:
        return "EvalStop-v0 (not reset)"
    g = sim.num_gpus
    used = g - sim.free
    width = 40
    bar = "#" * round(width * used / g) + "." * (width - round(width * used / g))
    lines = [
        f"t = {sim.now:8.2f} h   GPUs [{bar}] {used}/{g} busy",
        f"jobs: {sim.n_in_system} in system, {sim.n_waiting} waiting, "
        f"{sim.n_done}/{sim.n_jobs} done, {sim.n_decisions} decisions",
    ]
    v = sim.pending_view
    if v is None:
        lines.append("episode over")
    else:
        spark = " ".join(f"{e:.3f}" for e in v.evals[-6:])
        lines.append(
            f"deciding: {JOB_TYPES[v.job_type].upper()} job at progress {v.progress:.0%}, "
            f"{v.consecutive_declines} consecutive decline(s)"
        )
        lines.append(f"  last evals: {spark}")
        lines.append(f"  last loss : {' '.join(f'{x:.3f}' for x in v.loss[-6:])}")
    return "\n".join(lines) + "\n"


def rgb_frame(sim: Simulator | None) -> np.ndarray:
    """A 96 x 320 picture: one cell per GPU (busy dark), then the job's eval bars."""
    img = np.full((96, 320, 3), 255, np.uint8)
    if sim is None:
        return img
    g, used = sim.num_gpus, sim.num_gpus - sim.free
    cols = min(g, 64)
    per_cell = g / cols
    cw = 320 // cols
    for c in range(cols):
        busy = c * per_cell < used
        img[4:28, c * cw + 1 : (c + 1) * cw - 1] = (40, 40, 40) if busy else (200, 220, 200)
    v = sim.pending_view
    if v is not None and v.evals:
        evals = np.asarray(v.evals)
        lo, hi = float(evals.min()) - 0.05, float(evals.max()) + 0.05
        bw = 320 // max(len(evals), 1)
        for i, e in enumerate(evals):
            h = int(60 * (e - lo) / (hi - lo))
            color = (200, 60, 60) if i == len(evals) - 1 else (60, 90, 200)
            img[94 - h : 94, i * bw + 2 : (i + 1) * bw - 2] = color
    return img
