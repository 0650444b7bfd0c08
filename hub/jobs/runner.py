"""Runs a job's work once, uniformly: mark running, capture logs, map errors, mark the final state.

A task calls ``execute(job_id, work)``; ``work(ctx)`` returns the job's result (a JSON object) or
raises. ``CodedError`` carries a code and a message meant for the scientist; any other exception is
logged here with its traceback and recorded as ``internal_error`` without its text.

Cancellation: ``hub.jobs.services.cancel_job`` marks the row and revokes the task with SIGUSR2 (Celery
sends it to the pool process running it); the heartbeat thread also sees the mark and sends SIGUSR2 to
its own main thread, for pools where revocation cannot reach the task. The signal raises ``JobCancelled``
in the work, which unwinds like any error: its ``finally`` blocks remove work folders, a version being
published is rolled back with its new blobs (``services.create_version``), and the job ends ``cancelled``.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from hpcfair.compute import CodedError

from hub.jobs.models import Job, log_line, stale_limit

log = logging.getLogger(__name__)
MAX_LOG_LINES = 2000
PROGRESS_S = 1.0  # a job's progress is written at most this often (every batch cost a write before)


class JobCancelled(BaseException):
    """Raised in a job's work when it is cancelled; a BaseException, so that ``except Exception`` in the work
    does not swallow it."""


class JobContext:
    """What a task's work sees: the job, and ways to report progress and log lines."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.progress_written = 0.0

    def log(self, message: str, level: str = "info") -> None:
        self.job.log = (self.job.log + [log_line(level, message)])[-MAX_LOG_LINES:]
        Job.objects.filter(pk=self.job.pk).update(log=self.job.log)

    def progress(self, fraction: float) -> None:
        """Record how far the job is: in the database at most every ``PROGRESS_S`` (and at the end)."""
        self.job.progress = max(0.0, min(1.0, fraction))
        now = time.monotonic()
        if self.job.progress >= 1.0 or now - self.progress_written >= PROGRESS_S:
            self.progress_written = now
            Job.objects.filter(pk=self.job.pk).update(progress=self.job.progress)


def _claim(job_id: str) -> Job | None:
    """Mark the job running; None when it is final already (a redelivered, finished message)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            log.warning("job %s does not exist; message dropped", job_id)
            return None
        if job.is_final:
            return None
        if job.cancel_requested:
            job.mark_cancelled("The job was cancelled before it ran again.")
            job.save()
            return None
        if (job.state == Job.State.RUNNING and job.heartbeat and job.heartbeat > stale_limit()
                and not job.worker_is_gone):
            log.info("job %s is running on %s; duplicate message dropped", job.pk, job.worker)
            return None
        if job.state == Job.State.RUNNING:
            # The message came back: the worker that ran it died mid-task.
            job.append_log("warning", f"worker {job.worker or '?'} was lost; attempt {job.attempts + 1}")
        if job.attempts >= settings.HUB_JOB_MAX_ATTEMPTS:
            job.mark_worker_lost()
            job.save()
            return None
        job.state = Job.State.RUNNING
        job.attempts += 1
        job.started = job.started or timezone.now()
        job.worker = f"{socket.gethostname()}:{os.getpid()}"
        job.heartbeat = timezone.now()
        job.save()
        return job


def _succeed(job: Job, result: Any) -> None:
    job.state = Job.State.SUCCEEDED
    job.finished = timezone.now()
    job.progress = 1.0
    job.result = result
    job.save()


def _fail(job: Job, code: str, detail: str) -> None:
    job.mark_failed(code, detail)
    job.save()


_running: dict[str, Any] = {"job": None, "raised": False}  # what SIGUSR2 stops in this process


def on_cancel_signal(signum, frame) -> None:
    """SIGUSR2: stop the job this process runs (if any) by raising ``JobCancelled`` in it."""
    if _running["job"] is not None and not _running["raised"]:
        _running["raised"] = True  # once: the work's cleanup must not be interrupted again
        raise JobCancelled()


def _cancel(job: Job) -> None:
    from hub.jobs.services import CANCELLED_DETAIL

    job.refresh_from_db(fields=["log", "cancel_requested"])
    job.mark_cancelled(CANCELLED_DETAIL)
    job.save()


def execute(job_id: str, work: Callable[[JobContext], dict[str, Any]]) -> None:
    job = _claim(job_id)
    if job is None:
        return
    ctx = JobContext(job)
    stop = threading.Event()
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        signal.signal(signal.SIGUSR2, on_cancel_signal)
    _running.update(job=job.pk, raised=False)
    beat = threading.Thread(target=_heartbeat, args=(job.pk, stop, in_main), name=f"heartbeat-{job.pk}",
                            daemon=True)
    beat.start()
    try:
        try:
            result = work(ctx)
        finally:
            _running["job"] = None  # from here on a late SIGUSR2 is ignored
    except JobCancelled:
        log.info("job %s (%s) was cancelled", job.pk, job.kind)
        _cancel(job)
    except CodedError as exc:
        _fail(job, exc.code, exc.detail)
    except Exception:
        log.exception("job %s (%s) failed unexpectedly", job.pk, job.kind)
        _fail(job, "internal_error",
              f"The job failed unexpectedly; the administrators can trace it by job id {job.pk}.")
    else:
        _succeed(job, result)
    finally:
        stop.set()
        beat.join()


def _heartbeat(job_id, stop: threading.Event, signal_main: bool) -> None:
    """Touch the job's heartbeat until ``stop``: a job whose heartbeats stop lost its worker. When the job
    was cancelled meanwhile, signal the main thread (the work) to stop."""
    from django.db import connection

    signalled = False
    try:
        while not stop.wait(settings.HUB_JOB_HEARTBEAT_S):
            Job.objects.filter(pk=job_id, state=Job.State.RUNNING).update(heartbeat=timezone.now())
            if signal_main and not signalled and Job.objects.filter(pk=job_id, cancel_requested__isnull=False).exists():
                signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR2)
                signalled = True  # and keep beating while the work unwinds
    finally:
        connection.close()
