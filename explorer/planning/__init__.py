"""Planning off the web thread: a process-wide plan store and the jobs that fill it.

- :mod:`explorer.planning.schedule`: the cost model's estimates, the plan order (cheapest first)
  and which mechanisms wait for the user's "Plan anyway";
- :mod:`explorer.planning.jobs`: :class:`~explorer.planning.jobs.PlanningJob`, one per
  ``(workload, noise)`` shared by its subscribers, and its
  :class:`~explorer.planning.jobs.JobStatus`;
- :mod:`explorer.planning.store`: :class:`~explorer.planning.store.PlanStore`, the finished plans
  and the queue of jobs, and ``STORE``, the one every session of this process shares;
- :mod:`explorer.planning.settings`: ``EXPLORER_PLANNERS``, ``EXPLORER_PLANNING`` and the
  planner threads' CPU priority;
- :mod:`explorer.planning.workers`: the worker processes that plan.

Pages never reach the store: they ask their :class:`~explorer.session.Session`. Nothing here
imports Panel; it is unit-testable without a browser or a server.
"""
