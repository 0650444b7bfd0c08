"""The hub's worker process: the Celery executor's tasks (``workers.tasks``) and the worker's steps (the
gateway's lane threads, the reaper, housekeeping, the Slurm poller). The jobs themselves are kinds in the hub's
apps (``hub.jobs.kinds``)."""
