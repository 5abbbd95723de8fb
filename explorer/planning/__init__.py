"""Planning off the web thread: a process-wide plan store and the jobs that fill it.

- :mod:`explorer.planning.schedule`: the cost model's estimates, the plan order (cheapest first)
  and which mechanisms wait for the user's "Plan anyway";
- :mod:`explorer.planning.jobs`: :class:`~explorer.planning.jobs.PlanningJob`, one per
  ``(workload, noise)`` shared by its subscribers, and its
  :class:`~explorer.planning.jobs.JobStatus`;
- :mod:`explorer.planning.store`: :class:`~explorer.planning.store.PlanStore`, the finished plans
  and the queue of jobs, and ``STORE``, the one every session of this process shares;
- :mod:`explorer.planning.plan_cache`: :class:`~explorer.planning.plan_cache.PlanCache`, the
  finished plans on disk that every serving process shares (size-bounded, least recently used
  out first, a corrupt entry dropped);
- :mod:`explorer.planning.board`: jobs' status rows and cancel flags in the shared store, so
  any process sees a job and may cancel it;
- :mod:`explorer.planning.settings`: ``EXPLORER_PLANNERS``, ``EXPLORER_PLANNING``,
  ``EXPLORER_MAX_JOBS`` and the planner threads' CPU priority;
- :mod:`explorer.planning.workers`: the worker processes that plan.

Pages never reach the store: they ask their :class:`~explorer.session.Session`. Nothing here
imports Panel; it is unit-testable without a browser or a server.
"""
