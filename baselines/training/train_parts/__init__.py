"""The steps of a training run (:mod:`baselines.training.train`), one concept each.

:mod:`.hyperparam_checks` (the overrides refused before anything is built), :mod:`.envs`
(the training and evaluation envs), :mod:`.model` (the SB3 model and what it learns
under), :mod:`.evaluation` (the periodic evaluation, its learning curve and EvalStop's
reference) and :mod:`.model_file` (the file written, its metadata and hash).  The train
module re-exports their names.
"""
