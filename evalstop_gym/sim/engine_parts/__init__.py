"""The parts of the simulator (:mod:`evalstop_gym.sim.engine`), one concept each.

:mod:`.events` (the event kinds, the decisions and the event log's record),
:mod:`.episode` (the seed check, the episode's draw and its per-job columns),
:mod:`.lifecycle` (a job's arrival, start, preemption and end), :mod:`.loop` (the
event loop: ``advance``/``next_decision``, ``decide`` and ``run``), :mod:`.readout`
(what the engine shows of its state: counts, job snapshots, views, the jobs in the
system) and :mod:`.results` (the per-job record and the metrics).  The last four hold
mixins of :class:`~evalstop_gym.sim.engine.Simulator`, as :mod:`~evalstop_gym.sim.queues`
and :mod:`~evalstop_gym.sim.deprioritize` do; the engine re-exports every name.
"""
