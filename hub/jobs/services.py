"""Creating and dispatching jobs. Tasks are sent by name, after the transaction commits, with the
job id only, so the web process never imports worker code (or the frameworks it loads)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import transaction

from hub.jobs.models import Job
from workers.celery import app

# Job kind -> Celery task name; the tasks live in ``workers``.
TASKS: dict[str, str] = {
    Job.Kind.FIXITY: "hub.fixity",
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
