"""Each worker follows the hub's Slurm jobs (``hub.jobs.slurm.poll``) every ``HUB_SLURM_POLL_S`` when
``HUB_EXECUTOR=slurm``: a thread of its own, because finishing a job publishes its outputs and must not hold
up Celery's timer (the reaper). A PostgreSQL advisory lock lets one worker poll at a time."""

from __future__ import annotations

from workers.housekeeping import PeriodicStep


class SlurmPollStep(PeriodicStep):
    name_of_thread = "hub-slurm"

    def interval(self) -> float:
        from django.conf import settings

        return settings.HUB_SLURM_POLL_S if settings.HUB_EXECUTOR == "slurm" else 0

    def tick(self) -> None:
        from hub.jobs.slurm import poll

        poll()
