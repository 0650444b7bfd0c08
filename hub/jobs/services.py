"""Creating and dispatching jobs. Every job is sent as the one task ``hub.job`` (``workers.tasks``), by name,
after the transaction commits, with the job id only; the worker finds its kind in ``hub.jobs.kinds``."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from kombu.exceptions import KombuError

from hub.errors import HubError
from hub.jobs import executors, kinds, quota
from hub.jobs.models import Job, stale_limit
from hub.orgs import billing
from hub.registry.files_access import require_files_of

log = logging.getLogger(__name__)

def create_job(
    kind: str,
    requester,
    *,
    version=None,
    params: dict[str, Any] | None = None,
    device: str = "cpu",
    limited: bool = False,
    job_id: uuid.UUID | None = None,
    account: str | None = None,
) -> Job:
    """Store a queued job and dispatch it once the surrounding transaction commits, to its kind's queue (the
    ``device``'s queue for a kind whose ``queue`` is ``kinds.DEVICE``).

    ``limited``: the requester asked for it, so it is refused past their quota of jobs at once (429
    ``too_many_jobs``), counted under their lock in the transaction that writes the row (``quota.take_slot``).
    Call it outside other transactions, so that the lock ends with the row's commit. ``job_id``: the id chosen
    beforehand, for inputs staged under it before the row exists. ``account``: the Slurm account the requester
    names (``hub.orgs.billing``; refused with 403 ``account_not_allowed`` when they may not use it)."""
    if kind not in kinds.KINDS:
        raise ValueError(f"no app registers the job kind {kind!r} (hub.jobs.kinds)")
    queue = device if kinds.KINDS[kind].queue == kinds.DEVICE else kinds.KINDS[kind].queue
    if version is not None and requester is not None:
        require_files_of(requester, version)  # a job on restricted files needs a grant (hub.registry.files_access)
    owner = version.artifact.owner if version is not None else None
    billed = billing.choose(requester, owner, account, executors.executor_for(kind).place(device))
    with transaction.atomic():
        if limited:
            quota.take_slot(requester)
            if owner is not None:
                quota.take_owner_slot(owner)
        job = Job.objects.create(id=job_id or uuid.uuid4(), kind=kind, requester=requester, version=version,
                                 params=params or {}, queue=queue, device=device, counted=limited,
                                 account=billed.account if billed else "", qos=billed.qos if billed else "")
        transaction.on_commit(partial(dispatch, job))
    return job


def dispatch(job: Job) -> None:
    """Send the job to its executor (``hub.jobs.executors``): Celery's task to the job's queue, or the task
    that submits it to a batch scheduler (a worker stages its files: the web process does not).

    The job is already committed when this runs, so a broker that cannot be reached fails nothing: the job
    stays queued, its log says why, and ``reap_stale`` sends it again once ``HUB_JOB_QUEUED_STALE_S`` has
    passed since it was created."""
    try:
        executors.of(job).dispatch(job)
    except (KombuError, OSError) as error:
        log.warning("job %s could not be sent to the broker: %s", job.pk, error)
        with transaction.atomic():
            waiting = Job.objects.select_for_update().filter(pk=job.pk, state=Job.State.QUEUED).first()
            if waiting is not None:
                waiting.append_log("warning", f"the job queue could not be reached ({error}); the job waits and "
                                              f"is sent again after {settings.HUB_JOB_QUEUED_STALE_S:g} s")
                waiting.save(update_fields=["log"])
        return
    Job.objects.filter(pk=job.pk).update(dispatched=timezone.now())


def reap_stale(queryset=None) -> int:
    """Heal jobs that no worker will finish; returns how many were touched.

    - running, and its worker is gone (a dead process on this host) or silent for ``HUB_JOB_STALE_S``: queued
      again, failed with ``worker_lost`` after ``HUB_JOB_MAX_ATTEMPTS`` starts, or cancelled if that was asked;
    - queued, its message sent more than ``HUB_JOB_QUEUED_STALE_S`` ago while nothing runs on its queue (the
      message was lost with a killed worker or broker): sent again. A duplicate message is harmless: the
      runner drops messages of jobs that are final or running elsewhere.
    """
    jobs = (queryset if queryset is not None else Job.objects.all()).filter(execution__isnull=True)  # Celery's
    limit = stale_limit()
    running = jobs.filter(state=Job.State.RUNNING)
    candidates = set(running.filter(Q(heartbeat__lt=limit) | Q(heartbeat__isnull=True, started__lt=limit))
                     .values_list("pk", flat=True))
    candidates |= {pk for pk, worker in running.exclude(pk__in=candidates).values_list("pk", "worker")
                   if Job(worker=worker).worker_is_gone}
    reaped = sum(_reap_running(pk, limit) for pk in candidates)
    waited = timezone.now() - timedelta(seconds=settings.HUB_JOB_QUEUED_STALE_S)
    stuck = jobs.filter(state=Job.State.QUEUED).filter(
        Q(dispatched__lt=waited) | Q(dispatched__isnull=True, created__lt=waited))
    busy = set(Job.objects.filter(state=Job.State.RUNNING, heartbeat__gte=limit).values_list("queue", flat=True))
    for job_id in list(stuck.exclude(queue__in=busy).values_list("pk", flat=True)):
        with transaction.atomic():
            job = Job.objects.select_for_update().filter(pk=job_id, state=Job.State.QUEUED).first()
            if job is None or (job.dispatched or job.created) >= waited:
                continue
            job.append_log("warning", f"no worker took the job in {settings.HUB_JOB_QUEUED_STALE_S:g} s "
                                      "(its message was lost); sent again")
            job.save(update_fields=["log"])
            transaction.on_commit(partial(dispatch, job))
            reaped += 1
    return reaped


def _reap_running(job_id, limit) -> int:
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id, state=Job.State.RUNNING).first()
        if job is None or ((job.heartbeat or job.started or timezone.now()) >= limit and not job.worker_is_gone):
            return 0
        job.append_log("warning", f"worker {job.worker or '?'} was lost (attempt {job.attempts})")
        if job.cancel_requested:
            job.mark_cancelled(CANCELLED_DETAIL)
        elif job.attempts >= settings.HUB_JOB_MAX_ATTEMPTS:
            job.mark_worker_lost()
        else:
            job.state = Job.State.QUEUED
            job.append_log("info", "queued again")
            transaction.on_commit(partial(dispatch, job))
        job.save()
        return 1


CANCELLED_DETAIL = "The job was cancelled; nothing it had made was kept."


def cancel_job(job: Job, user) -> Job:
    """Cancel a queued job at once, or ask a running one's worker to stop it (its runner then removes what
    the job had made and marks it cancelled). Raises ``job_final`` for a finished job."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.is_final:
            raise HubError("job_final", f"The job has {job.state} already; there is nothing to cancel.")
        job.cancel_requested = job.cancel_requested or timezone.now()
        job.append_log("warning", f"cancellation asked by {user.username}")
        running = job.state == Job.State.RUNNING
        if not running or job.execution:  # a batch job's tasks and folder go with it now
            job.mark_cancelled(CANCELLED_DETAIL)
        job.save()
    executors.of(job).cancel(job)  # Celery's running task is stopped by its runner, which marks it
    return job
