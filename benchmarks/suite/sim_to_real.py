"""The sim-to-real check: stoppers designed on the twin, scored on the twin and on real runs.

    python benchmarks/suite/sim_to_real.py --out runs/sim-to-real            # everything
    python benchmarks/suite/sim_to_real.py --out DIR --parts check --prices 1

Parts (``--parts``, comma-separated; default all):

* ``check``: the panel built on ``english-twin`` at each price, scored on the twin's test
  runs and on ``english-heldout``'s (the real held-out runs), against the CurveOracle; each
  stopper's difference with its CI, the mean absolute difference and Spearman's rho
  (targets <= 0.15 and >= 0.85) -> ``check.md``;
* ``oos``: out of sample, on ``english_rlhf_b64`` (72 new runs, eval batch 64), the panel
  built on the twin set to that recipe -> ``out_of_sample.md``; ``--oos-corpus
  english_rlhf_s2 --oos-batch 32`` checks the 72 runs of the fitted recipe on new seeds;
* ``diagnosis``: the 1x panel on the ladder of environments between ``grounded-0.05`` and
  the real runs, one factor changed at a time -> ``diagnosis.md``;
* ``break-even``: from the check and out-of-sample rows, at each price and eval batch, the
  stopper best on the twin and whether it pays on the real runs -> ``break_even.md``;
* ``trainers``: at 1x, the fitted corpus's test runs and each ``--trainer-corpora`` corpus
  (``NAME:EVAL_BATCH``), scored on all runs and on each trainer's alone -> ``by_trainer.md``
  (not in the default: name it);
* ``pool``: the pooled twin (fitted on every English corpus but the one it predicts, by
  trainer, set to the target's eval batch and trainer mix), its ``--pool-checks`` (some of
  heldout, loo-b64, loo-s2, s3) -> ``pool.md`` (not in the default: name it);
* ``spread``: real against real: ``--spread CHECK:CORPUS`` scores that pool check's panel
  on its target's runs and on another corpus of the same recipe neither the pool nor the
  panel read, the floor under any twin's figures -> ``spread.md`` (name it).

The real runs' scores are never used to build or choose a stopper.  Test seeds 100-129.
A finished table in ``--out`` is never overwritten: choose a new folder.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from evalstop_experiments.sim_to_real import TEST_SEEDS, check_markdown, run_check
from evalstop_experiments.sim_to_real_diagnosis import diagnose, diagnosis_markdown, variants
from evalstop_experiments.sim_to_real_pool import POOL_CHECKS, corpus_spread, run_pool_check
from evalstop_experiments.sim_to_real_recipe import (
    OOS_CORPUS,
    OOS_EVAL_BATCH,
    break_even,
    break_even_markdown,
    out_of_sample,
)
from evalstop_experiments.sim_to_real_trainers import by_trainer, by_trainer_markdown
from evalstop_gym import ConfigError
from evalstop_gym.corpus.packaged import DATA_DIR
from evalstop_gym.corpus.twin import FORMS

PARTS = ("check", "oos", "diagnosis", "break-even")
EXTRA_PARTS = ("trainers", "pool", "spread")


def _prices(text: str) -> tuple[float, ...]:
    try:
        out = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError("--prices", text, "comma-separated price factors > 0") from None
    if not out or not all(p > 0 for p in out):
        raise ConfigError("--prices", text, "comma-separated price factors > 0")
    return out


def _corpora(text: str, shipped: list[str]) -> list[tuple[str, int]]:
    """``NAME:EVAL_BATCH,...`` as (shipped English corpus, eval batch >= 1) pairs."""
    out = []
    for item in text.split(","):
        name, _, batch = item.partition(":")
        if name not in shipped or not batch.isdigit() or int(batch) < 1:
            raise ConfigError(
                "--trainer-corpora", text, f"NAME:EVAL_BATCH,... with NAME one of {shipped}"
            )
        out.append((name, int(batch)))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the chosen parts and write their tables into ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the tables (a new one)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"some of {','.join(PARTS)}")
    ap.add_argument("--prices", default="0.5,1,2", help="price factors of the check")
    ap.add_argument("--map-prices", default="0.5,1,2,4,8", help="price factors of the map")
    ap.add_argument("--oos-corpus", default=OOS_CORPUS, help="packaged corpus of the oos part")
    ap.add_argument("--oos-batch", type=int, default=OOS_EVAL_BATCH, help="its eval batch")
    ap.add_argument(
        "--trainer-corpora",
        default=f"{OOS_CORPUS}:{OOS_EVAL_BATCH}",
        help="NAME:EVAL_BATCH,... of the trainers part",
    )
    ap.add_argument(
        "--pool-checks", default=",".join(POOL_CHECKS), help=f"some of {','.join(POOL_CHECKS)}"
    )
    ap.add_argument(
        "--pool-form", default="rise", help="the pooled twin's form: rise, or shape (the first)"
    )
    ap.add_argument(
        "--spread", default="loo-s2:english_rlhf_s3", help="CHECK:CORPUS of the spread part"
    )
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    bad = [p for p in parts if p not in PARTS + EXTRA_PARTS]
    if bad or not parts:
        raise ConfigError(
            "--parts", args.parts, f"comma-separated names from {list(PARTS + EXTRA_PARTS)}"
        )
    prices, map_prices = _prices(args.prices), _prices(args.map_prices)
    if args.oos_batch < 1:
        raise ConfigError("--oos-batch", args.oos_batch, "a whole number of completions >= 1")
    shipped = sorted(p.stem for p in DATA_DIR.glob("english_rlhf*.jsonl"))
    if args.oos_corpus not in shipped:
        raise ConfigError("--oos-corpus", args.oos_corpus, f"a shipped English corpus: {shipped}")
    if "break-even" in parts and args.oos_batch == 32:
        raise ConfigError("--oos-batch", 32, "another batch than the check's 32 with break-even")
    trainer_corpora = _corpora(args.trainer_corpora, shipped)
    pool_checks = [c for c in args.pool_checks.split(",") if c]
    if args.pool_form not in FORMS:
        raise ConfigError("--pool-form", args.pool_form, f"one of {list(FORMS)}")
    if not pool_checks or any(c not in POOL_CHECKS for c in pool_checks):
        raise ConfigError("--pool-checks", args.pool_checks, f"some of {list(POOL_CHECKS)}")
    for c in pool_checks if "pool" in parts else ():
        target = POOL_CHECKS[c].target
        if target is not None and target not in shipped:
            raise ConfigError("--pool-checks", c, f"a check whose corpus ships ({target} does not)")
    spread_check, _, spread_corpus = args.spread.partition(":")
    if spread_check not in POOL_CHECKS or spread_corpus not in shipped:
        raise ConfigError("--spread", args.spread, f"CHECK:CORPUS, CHECK of {list(POOL_CHECKS)}")
    out = Path(args.out)
    tables = ("check.md", "out_of_sample.md", "diagnosis.md", "break_even.md", "by_trainer.md")
    pool_tables = ("pool.md", *(f"pool_{c}.md" for c in pool_checks))
    done = [n for n in (*tables, *pool_tables, "spread.md") if (out / n).exists()]
    if done:
        raise ConfigError("--out", str(out), f"a folder without finished tables (it has {done})")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.process_time()

    def say(msg: str) -> None:
        print(f"[{time.process_time() - t0:7.0f} CPU-s] {msg}", flush=True)

    check_prices = sorted(set(prices) | (set(map_prices) if "break-even" in parts else set()))
    rows = oos = None
    if "check" in parts or "break-even" in parts:
        rows, _ = run_check(check_prices, TEST_SEEDS, progress=say)
        (out / "check.md").write_text(
            check_markdown([r for r in rows if r.price_factor in prices]) + "\n", encoding="utf-8"
        )
        say(f"wrote {out / 'check.md'}")
    if "oos" in parts or "break-even" in parts:
        oos_prices = sorted(set(prices) | (set(map_prices) if "break-even" in parts else set()))
        oos = out_of_sample(
            out, oos_prices, eval_batch=args.oos_batch, corpus=args.oos_corpus, progress=say
        )
        (out / "out_of_sample.md").write_text(
            check_markdown([r for r in oos if r.price_factor in prices]) + "\n", encoding="utf-8"
        )
        say(f"wrote {out / 'out_of_sample.md'}")
    if "break-even" in parts:
        cells = break_even(
            {
                32: [r for r in rows if r.price_factor in map_prices],
                args.oos_batch: [r for r in oos if r.price_factor in map_prices],
            }
        )
        (out / "break_even.md").write_text(break_even_markdown(cells) + "\n", encoding="utf-8")
        say(f"wrote {out / 'break_even.md'}")
    if "diagnosis" in parts:
        from evalstop_experiments.scoring import env_kwargs
        from evalstop_experiments.sim_to_real import N_JOBS, TWIN_TASK, build_panel

        panel = build_panel(env_kwargs(TWIN_TASK, 1.0, N_JOBS))
        ladder = variants(out, 1.0)
        scores = diagnose(panel, ladder, TEST_SEEDS, progress=say)
        (out / "diagnosis.md").write_text(
            diagnosis_markdown(scores, ladder) + "\n", encoding="utf-8"
        )
        say(f"wrote {out / 'diagnosis.md'}")
    trainers = None
    if "trainers" in parts:
        trainers = by_trainer(out, trainer_corpora, progress=say)
        (out / "by_trainer.md").write_text(by_trainer_markdown(trainers) + "\n", encoding="utf-8")
        say(f"wrote {out / 'by_trainer.md'}")
    pool = []
    if "pool" in parts:
        sections = []
        for c in pool_checks:
            got = run_pool_check(out, c, prices, TEST_SEEDS, form=args.pool_form, progress=say)
            pool += [{"check": c, **asdict(r)} for r in got]
            sections.append(f"## {c} ({args.pool_form})\n\n{check_markdown(got)}\n")
            # each check's table as soon as it is done: a later check's failure loses none
            (out / f"pool_{c}.md").write_text(sections[-1], encoding="utf-8")
        (out / "pool.md").write_text("\n".join(sections), encoding="utf-8")
        say(f"wrote {out / 'pool.md'}")
    spread = []
    if "spread" in parts:
        spread = corpus_spread(
            out, spread_check, spread_corpus, prices, TEST_SEEDS, form=args.pool_form, progress=say
        )
        target = POOL_CHECKS[spread_check].target
        table = check_markdown(spread).replace(
            "| twin [95 % CI] | real [95 % CI] | real - twin [95 % CI] |",
            f"| {target} [95 % CI] | {spread_corpus} [95 % CI] | difference [95 % CI] |",
        )
        (out / "spread.md").write_text(table + "\n", encoding="utf-8")
        say(f"wrote {out / 'spread.md'}")
    found = (("check", rows), ("oos", oos), ("trainers", trainers), ("spread", spread))
    data = {k: [asdict(r) for r in v] for k, v in found if v}
    if pool:
        data["pool"] = pool
    (out / "rows.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ConfigError as e:
        sys.exit(f"sim_to_real.py: {e}")
