"""The experiment harness: the paper's experiments (E1-E7) as cells, run, aggregated, reported.

:mod:`~evalstop_experiments.experiments` defines the cells, :mod:`~evalstop_experiments.runner`
runs them resumably, :mod:`~evalstop_experiments.report` and :mod:`~evalstop_experiments.plots`
turn the rows into CSV, Markdown and PNG, and :mod:`~evalstop_experiments.reproduce` does it all.
"""
