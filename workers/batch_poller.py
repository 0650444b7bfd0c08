"""Each worker follows the hub's batch jobs (``Executor.poll`` of every batch executor in ``HUB_EXECUTORS``) every
``HUB_SLURM_POLL_S``: a thread of its own, because finishing a job publishes its outputs and must not hold up
Celery's timer (the reaper). A PostgreSQL advisory lock per executor lets one worker poll at a time."""

from __future__ import annotations

from workers.housekeeping import PeriodicStep


class BatchPollStep(PeriodicStep):
    name_of_thread = "hub-batch"

    def interval(self) -> float:
        from django.conf import settings

        from hub.jobs import executors

        return settings.HUB_SLURM_POLL_S if executors.batch_executors() else 0

    def tick(self) -> None:
        from hub.jobs import executors

        for executor in executors.batch_executors():
            executor.poll()
