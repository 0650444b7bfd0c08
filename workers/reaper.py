"""Each worker heals jobs that no worker would finish (``hub.jobs.services.reap_stale``): at start and then
every ``HUB_JOB_REAP_S`` on Celery's own worker timer. Several workers may reap at once; rows are locked."""

from __future__ import annotations

import logging
import signal

from celery import bootsteps
from celery.exceptions import TimeLimitExceeded
from celery.signals import task_failure, worker_process_init

log = logging.getLogger(__name__)


def reap() -> None:
    from django.db import close_old_connections

    from hub.jobs.services import reap_stale

    close_old_connections()
    try:
        healed = reap_stale()
    except Exception:  # noqa: BLE001 - the database is away for a moment: the next round tries again
        log.warning("reaper: could not look for stuck jobs", exc_info=True)
        return
    if healed:
        log.warning("reaper: %d stuck job(s) queued again, failed or cancelled", healed)


class ReaperStep(bootsteps.StartStopStep):
    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs) -> None:
        super().__init__(worker, **kwargs)
        self.tref = None

    def start(self, worker) -> None:
        from django.conf import settings

        reap()
        self.tref = worker.timer.call_repeatedly(settings.HUB_JOB_REAP_S, reap)

    def stop(self, worker) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None


@worker_process_init.connect
def listen_for_cancellation(**kwargs) -> None:
    """A pool process stops its running job on SIGUSR2 (a revocation with terminate) instead of dying."""
    from hub.jobs.runner import on_cancel_signal

    signal.signal(signal.SIGUSR2, on_cancel_signal)


@task_failure.connect
def fail_on_time_limit(sender=None, exception=None, args=None, **kwargs) -> None:
    """Celery killed a task past ``task_time_limit`` (HUB_JOB_TIME_LIMIT_S); in the worker's main process, its
    job fails with ``time_limit`` instead of being retried as a lost worker."""
    if not isinstance(exception, TimeLimitExceeded) or not args:
        return
    from django.conf import settings
    from django.db import transaction

    from hub.jobs.models import Job

    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=args[0], state=Job.State.RUNNING).first()
        if job is not None:
            job.mark_failed("time_limit", f"The job ran longer than the hub's limit of "
                                          f"{settings.CELERY_TASK_TIME_LIMIT:g} s and was stopped.")
            job.save()
