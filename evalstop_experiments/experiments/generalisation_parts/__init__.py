"""The parts of E9 (:mod:`evalstop_experiments.experiments.generalisation`), one concept each.

:mod:`.ppo_grid` (the PPO grid and its models), :mod:`.ppo_scores` (a test column's rows),
:mod:`.references` (a cell's played references and where stoppers stop), :mod:`.lsm_models`
(the backward-induction models and their training), :mod:`.lsm_scores` (their rows) and
:mod:`.tables` (the tables and files).  The experiment module re-exports their names.
"""
