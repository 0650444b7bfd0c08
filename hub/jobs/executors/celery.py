"""The Celery executor (the default): the one task ``hub.job`` (``workers.tasks``) runs ``kind.run`` in a worker
of the kind's queue; the reaper (``hub.jobs.services.reap_stale``) heals what its workers lose."""

from __future__ import annotations

import logging

from hub.celery import app
from hub.jobs.executors import Executor, Job

log = logging.getLogger(__name__)


class Celery(Executor):
    name = "celery"

    def dispatch(self, job: Job) -> None:
        """The one job task; its id is the job's id, so that it can be revoked."""
        app.send_task("hub.job", args=[str(job.pk)], queue=job.queue, task_id=str(job.pk))

    def submit(self, job: Job) -> bool:
        self.dispatch(job)
        return True

    def cancel(self, job: Job) -> None:
        """A queued message is dropped when it arrives; a running task gets SIGUSR2 (``hub.jobs.runner``)."""
        try:
            app.control.revoke(str(job.pk), terminate=job.state == job.State.RUNNING, signal="SIGUSR2")
        except Exception:  # noqa: BLE001 - the broker is down: the runner notices at its next heartbeat anyway
            log.warning("could not broadcast the revocation of job %s", job.pk, exc_info=True)


EXECUTOR = Celery()
