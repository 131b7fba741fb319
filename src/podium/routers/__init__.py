"""Routers: small fitted models that choose the worker of a pool that answers a task, the baselines a trained
orchestrator is compared with (RouteLLM's, FrugalGPT's) and systems of their own (``kind: router``).

Every router here works over any number of workers. A *question router* (``knn``, ``logreg``, ``mf``) predicts, from
the question alone, the probability that each worker answers right, and asks the worker with the best predicted
accuracy less ``cost_weight`` times its mean price (:mod:`podium.routers.decide`); a *cascade* (``cascade``,
``cascade_checks``) asks workers from the cheapest up and stops at the first reply that its checks do not flag
(:mod:`podium.routers.checks`). They are fitted on a recording's train split (:mod:`podium.routers.fit`), saved and
loaded as one ``.npz`` file (:mod:`podium.routers.models`), and run as the orchestrator of the ``escalate`` policy
(:class:`podium.routers.backend.RouterBackend`), so a router is evaluated, served and budgeted like any system.
"""
