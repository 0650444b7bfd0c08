"""Creating and dispatching jobs. Tasks are sent by name, after the transaction commits, with the
job id only, so the web process never imports worker code (or the frameworks it loads)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from hub.jobs.models import Job, stale_limit
from workers.celery import app

# Job kind -> Celery task name; the tasks live in ``workers``.
TASKS: dict[str, str] = {
    Job.Kind.FIXITY: "hub.fixity",
    Job.Kind.CONVERT: "hub.convert",
    Job.Kind.VERIFY: "hub.verify",
    Job.Kind.OPTIMIZE: "hub.optimize",
    Job.Kind.INFER: "hub.infer",
    Job.Kind.COLLABORATE: "hub.collaborate",
    Job.Kind.BENCHMARK: "hub.benchmark",
    Job.Kind.CONTAINER: "hub.container",
}


def create_job(
    kind: str,
    requester,
    *,
    version=None,
    params: dict[str, Any] | None = None,
    queue: str = "cpu",
    device: str = "cpu",
) -> Job:
    """Store a queued job and dispatch it once the surrounding transaction commits."""
    if kind not in TASKS:
        raise ValueError(f"no task for job kind {kind!r}")
    job = Job.objects.create(
        kind=kind, requester=requester, version=version, params=params or {}, queue=queue, device=device
    )
    transaction.on_commit(partial(dispatch, job))
    return job


def dispatch(job: Job) -> None:
    """Send the job's task to its queue."""
    app.send_task(TASKS[job.kind], args=[str(job.pk)], queue=job.queue)


def reap_stale(queryset=None) -> int:
    """Jobs marked running whose worker stopped sending heartbeats: queue them again, or fail them
    with ``worker_lost`` after ``HUB_JOB_MAX_ATTEMPTS`` starts. Returns how many were reaped."""
    limit = stale_limit()
    stale = (queryset if queryset is not None else Job.objects.all()).filter(state=Job.State.RUNNING).filter(
        Q(heartbeat__lt=limit) | Q(heartbeat__isnull=True, started__lt=limit)
    )
    reaped = 0
    for job_id in list(stale.values_list("pk", flat=True)):
        with transaction.atomic():
            job = Job.objects.select_for_update().filter(pk=job_id, state=Job.State.RUNNING).first()
            if job is None or (job.heartbeat or job.started or timezone.now()) >= limit:
                continue
            job.append_log("warning", f"worker {job.worker or '?'} stopped responding (attempt {job.attempts})")
            if job.attempts >= settings.HUB_JOB_MAX_ATTEMPTS:
                job.mark_worker_lost()
            else:
                job.state = Job.State.QUEUED
                job.append_log("info", "queued again")
                transaction.on_commit(partial(dispatch, job))
            job.save()
            reaped += 1
    return reaped
