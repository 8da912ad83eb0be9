"""The held-out real-run task's published figures are what the code gives.

The suite's ``trl-heldout`` block in docs/SUITE_RESULTS.md and the README's held-out
table were once published from a replay the code no longer gave; this test plays the
task's reference stoppers at 1x on its 30 test seeds, as the suite does, and checks
the figures those pages print.  A deliberate change of the task or of Bayes fails it:
re-measure the pages (``evalstop-gym benchmark --suite --tasks trl-heldout --seeds 30``)
and update the figures here with them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("scipy")

from baselines.policies import EvalStop, NoStop
from evalstop_experiments import scoring

ROOT = Path(__file__).resolve().parents[2]
#: stopper (as the suite names it) -> its 1x score [95 % CI over test runs], as printed
PUBLISHED = {
    "EvalStop(k=2)": "-0.83 [-1.89, -0.26]",
    "Bayes (hard prior)": "0.30 [0.02, 0.44]",
    "Bayes (refitted on train runs)": "0.46 [0.29, 0.56]",
}
#: where each figure is printed
PAGES = {
    "EvalStop(k=2)": ("docs/SUITE_RESULTS.md",),
    "Bayes (hard prior)": ("docs/SUITE_RESULTS.md", "README.md"),
    "Bayes (refitted on train runs)": ("docs/SUITE_RESULTS.md", "README.md"),
}


@pytest.mark.slow
def test_the_heldout_references_score_what_the_pages_print() -> None:
    kw = scoring.env_kwargs("trl-heldout", 1.0, None, None)
    stoppers = [
        scoring.Stopper(scoring.NOSTOP, "NoStop", NoStop()),
        scoring.Stopper(scoring.EVALSTOP, "EvalStop(k=2)", EvalStop(2)),
        *scoring.references(kw),
    ]
    rows = scoring.score_task("trl-heldout", 1.0, kw, stoppers, list(range(30)))
    got = {r.stopper: f"{r.score:.2f} [{r.score_lo:.2f}, {r.score_hi:.2f}]" for r in rows}
    assert {k: got[k] for k in PUBLISHED} == PUBLISHED
    for name, pages in PAGES.items():
        for page in pages:
            text = (ROOT / page).read_text(encoding="utf-8").replace("−", "-")
            assert PUBLISHED[name] in text, (page, name)
