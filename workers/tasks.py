"""The Celery executor's tasks: one task runs every kind of job (``hub.jobs.kinds``), and one submits a job
to its batch executor (``hub.jobs.executors``)."""

from __future__ import annotations

from hub.celery import app
from hub.jobs import executors, kinds
from hub.jobs.models import Job
from hub.jobs.runner import execute


@app.task(name="hub.job")
def run_job(job_id: str) -> None:
    """Run a job of any kind in this process: its kind stages, computes and publishes (``JobKind.run``)."""
    kind = Job.objects.filter(pk=job_id).values_list("kind", flat=True).first()
    if kind is not None:
        execute(job_id, kinds.get(kind).run)


@app.task(name="hub.batch_submit")
def batch_submit(job_id: str) -> None:
    """Stage a job's folder and submit it to its kind's batch executor; a job it does not take (e.g. a model's
    cube) goes to the Celery task instead."""
    job = Job.objects.filter(pk=job_id).first()
    if job is not None and not job.is_final and not executors.executor_for(job.kind).submit(job):
        executors.get("celery").dispatch(job)
