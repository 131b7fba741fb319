"""The solve layer: one way for an orchestrator system to solve an item, under evaluation, data collection,
training and serving.

:mod:`podium.solve.config` holds :class:`SystemConfig` (run limits, pool, simulated user, instructions: the one
file format of an orchestrator), :mod:`podium.solve.system` :class:`System` and its :meth:`System.solve`,
:mod:`podium.solve.router` router systems (a fitted router as the orchestrator, ``kind: router``) and
:func:`~podium.solve.router.load_system`, which builds either kind from its file, :mod:`podium.solve.runner` the
resumable, USD-capped :class:`BatchRunner` of many units, and
:mod:`podium.solve.records` / :mod:`podium.solve.jsonl` the records those layers share and their JSON Lines files.
"""
