"""Celery tasks. Each one names its work and hands it to ``runner.execute``."""

from __future__ import annotations

import hashlib
from typing import Any

from hpcfair.compute import CodedError

from hub.storage import StorageUnavailable, get_blob_store
from workers import benchmark, collaborate, container, convert, finetune, infer
from workers.celery import app
from workers.runner import JobContext, execute

CHUNK = 8 * 1024 * 1024


@app.task(name="hub.fixity")
def fixity(job_id: str) -> None:
    """Re-read every file of a version from the object store and check its sha256."""
    execute(job_id, fixity_work)


def fixity_work(ctx: JobContext) -> dict[str, Any]:
    version = ctx.job.version
    if version is None or version.is_deleted:
        raise CodedError("gone", "The version was deleted before its fixity could be checked.")
    store = get_blob_store()
    files = list(version.files.select_related("blob"))
    report = []
    for index, file in enumerate(files, start=1):
        digest = hashlib.sha256()
        size = 0
        try:
            with store.open(file.blob_id) as stream:
                while chunk := stream.read(CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
        except FileNotFoundError:
            report.append({"path": file.path, "ok": False, "problem": "missing from the object store"})
            ctx.log(f"{file.path}: missing from the object store", "error")
            continue
        except StorageUnavailable as exc:
            raise CodedError("storage_unavailable", f"The object store could not be read: {exc}")
        ok = digest.hexdigest() == file.blob_id and size == file.size
        report.append({"path": file.path, "ok": ok, "sha256": digest.hexdigest(), "size": size})
        ctx.log(f"{file.path}: {'ok' if ok else 'CORRUPT'} ({size} bytes)", "info" if ok else "error")
        ctx.progress(index / len(files))
    return {"ok": all(item["ok"] for item in report), "files": report}



@app.task(name="hub.convert")
def convert_model(job_id: str) -> None:
    """Convert a version's model files to ONNX, verify them and publish the result."""
    execute(job_id, convert.convert_work)


@app.task(name="hub.verify")
def verify_model(job_id: str) -> None:
    """Validate uploaded ONNX files (checker, shape inference, a run in ONNX Runtime)."""
    execute(job_id, convert.convert_work)


@app.task(name="hub.optimize")
def optimize_model(job_id: str) -> None:
    """Optimise an ONNX file with ONNX Runtime and quantise it to int8; publish both."""
    execute(job_id, convert.optimize_work)


@app.task(name="hub.infer")
def infer_job(job_id: str) -> None:
    """Run a model over staged inputs or a dataset in batches; publish the outputs as a dataset version."""
    execute(job_id, infer.infer_work)


@app.task(name="hub.collaborate")
def merge_models(job_id: str) -> None:
    """Merge a chain of ONNX models into one, verify it against the chain, publish it with provenance."""
    execute(job_id, collaborate.merge_work)


@app.task(name="hub.benchmark")
def benchmark_model(job_id: str) -> None:
    """Measure a model's latency per batch size on this worker's hardware and record it."""
    execute(job_id, benchmark.benchmark_work)


@app.task(name="hub.container")
def build_container(job_id: str) -> None:
    """Make a model's MLCube (build and check its image where possible), or build a project's."""
    execute(job_id, container.container_work)


@app.task(name="hub.finetune")
def finetune_model(job_id: str) -> None:
    """Fine-tune a model on a dataset in the sandbox; publish the result (converted to ONNX after)."""
    execute(job_id, finetune.finetune_work)


@app.task(name="hub.slurm_submit")
def slurm_submit(job_id: str) -> None:
    """Prepare a job's folder and submit it to Slurm (hub.jobs.slurm); a kind's job that Slurm does not take
    (e.g. a model's cube) goes to its Celery task instead."""
    from hub.jobs import slurm
    from hub.jobs.models import Job
    from hub.jobs.services import send_to_celery

    job = Job.objects.filter(pk=job_id).first()
    if job is not None and not job.is_final and not slurm.submit(job):
        send_to_celery(job)
