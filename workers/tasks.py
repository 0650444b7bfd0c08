"""The Celery executor's tasks: one task runs every kind of job (``hub.jobs.kinds``), and one submits a job
to Slurm (``hub.jobs.slurm``)."""

from __future__ import annotations

from hub.celery import app
from hub.jobs import kinds, slurm
from hub.jobs.models import Job
from hub.jobs.runner import execute
from hub.jobs.services import send_to_celery


@app.task(name="hub.job")
def run_job(job_id: str) -> None:
    """Run a job of any kind in this process: its kind stages, computes and publishes (``JobKind.run``)."""
    kind = Job.objects.filter(pk=job_id).values_list("kind", flat=True).first()
    if kind is not None:
        execute(job_id, kinds.get(kind).run)


@app.task(name="hub.slurm_submit")
def slurm_submit(job_id: str) -> None:
    """Stage a job's folder and submit it to Slurm (hub.jobs.slurm); a job Slurm does not take (e.g. a model's
    cube) goes to the Celery task instead."""
    job = Job.objects.filter(pk=job_id).first()
    if job is not None and not job.is_final and not slurm.submit(job):
        send_to_celery(job)
