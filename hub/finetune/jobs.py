"""Fine-tuning jobs (kind ``finetune``). The base model's files and the dataset's files are copied out of the object
store into a private folder; ``hpcfair.finetune`` trains in the conversion sandbox (this process never loads the
model) and streams one line per epoch into the job's log. The result is published, in one transaction, as a new
version of a model in the requester's namespace (private unless asked), ``derived_from`` the base and ``trained_on``
the dataset; publishing it queues its conversion to ONNX and verification like any upload."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from hpcfair.compute import CodedError
from hpcfair.compute.sandboxed import run_request
from hpcfair.convert import Limits, sandbox

from hub.errors import HubError
from hub.jobs.files import fetch, staged
from hub.jobs.kinds import DEVICE, JobKind, Plan, register
from hub.jobs.models import Job
from hub.jobs.runner import JobContext
from hub.jobs.toolkit import hidden_paths, node_result, sandbox_plan
from hub.jobs.toolkit import limits as sandbox_limits
from hub.metadata import scientific
from hub.registry import services as registry
from hub.registry.models import Artifact, ProvenanceLink, Version
from hub.registry.services import ProvenanceRef

EXTRA_FILES = ("sample_inputs.npz", "loss_curve.png")


def limits() -> Limits:
    return sandbox_limits(cpu_seconds=settings.HUB_FINETUNE_CPU_S, wall_seconds=settings.HUB_FINETUNE_WALL_S)


def _live(version_id) -> Version:
    version = Version.objects.filter(pk=version_id, deleted_at__isnull=True).select_related("artifact__owner").first()
    if version is None:
        raise CodedError("gone", "The model or the dataset was deleted before the fine-tune ran.")
    return version


def _existing_result(ctx: JobContext) -> Version | None:
    """A retried job whose earlier attempt published already (idempotence)."""
    return (Version.objects.filter(artifact__owner=ctx.job.requester, artifact__name=ctx.job.params["output"]["name"],
                                   deleted_at__isnull=True, metadata__job=str(ctx.job.pk)).first())


def _fetch_all(version: Version, paths: list[str], root: Path, strip: str = "") -> None:
    """Copy ``paths`` of ``version`` under ``root``, keeping their folders (below ``strip``)."""
    for path in paths:
        relative = path[len(strip):].lstrip("/") if strip and path.startswith(strip + "/") else path
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        fetched = fetch(version, path, (root / relative).parent)
        fetched.rename(root / relative)


def sources(ctx: JobContext) -> tuple[Version, Version, Version | None]:
    """The base model and dataset versions (CodedError when deleted), and the version an earlier attempt of
    this job published, if any."""
    base = _live(ctx.job.version_id)
    dataset = _live(ctx.job.params["dataset"]["version_id"])
    return base, dataset, _existing_result(ctx)


def stage_files(ctx: JobContext, base: Version, dataset: Version, workdir: Path) -> dict[str, Any]:
    """Copy the base model's and the dataset's files into ``workdir``; returns the sandbox's request. Shared by
    the Celery worker (a private folder) and the Slurm path (a job folder the compute node reads)."""
    params = ctx.job.params
    source = params["source"]
    if "folder" in source:
        folder = source["folder"]
        paths = [f.path for f in base.files.all() if not folder or f.path.startswith(folder + "/")]
        _fetch_all(base, paths, workdir / "model", folder)
        model = "model"
    else:
        model = fetch(base, source["file"], workdir).name
    _fetch_all(dataset, params["dataset"]["files"], workdir / "dataset")
    ctx.log(f"fine-tuning {base} on {dataset} in a sandbox")
    if ctx.job.device == "gpu":  # the sandbox gives its child no GPU (hpcfair.convert.sandbox.child_env)
        ctx.log("the sandbox has no GPU: training runs on this worker's CPU", "warning")
    return {"task": "finetune", "model": model, "dataset": "dataset", "output": "out",
            "hyper": params["hyper"], "data_file": params.get("data_file"),
            "inputs": (base.metadata or {}).get("inputs"), "bounds": scientific.bounds()}


def publish_finetuned(ctx: JobContext, base: Version, dataset: Version, workdir: Path, report: dict[str, Any],
                      execution: dict[str, Any] | None = None) -> dict[str, Any]:
    """Publish what the sandbox's trainer wrote under ``workdir/out`` (``report``: its answer); returns the
    job's result. ``execution``: where it ran, for a batch job (hub.jobs.executors), kept in the metadata."""
    ctx.log(sandbox.describe(report["sandbox"]))
    files = [staged(sandbox.output_file(workdir, f"out/{name}"), name) for name in report["files"]]
    files += [staged(sandbox.output_file(workdir, f"out/{name}"), name) for name in EXTRA_FILES]
    version = _publish(ctx, base, dataset, files, report, execution)
    conversion = Job.objects.filter(version=version, kind__in=["convert", "verify"]).order_by(
        "created").first()
    return {"version": str(version), "pid": version.pid, "artifact": version.artifact.full_name,
            "base": {"loss": report["base"]["loss"], report["metric"]: report["base"][report["metric"]]},
            "final": report["final"], "metric": report["metric"], "epochs": len(report["history"]),
            "stopped_early": report["stopped_early"], "conversion_job": str(conversion.pk) if conversion else None}


def _reporter(ctx: JobContext):
    def report(line: str) -> None:
        stage = sandbox.parse_stage(line)
        ctx.log(stage[1] if stage else line)
        if stage is not None:
            ctx.progress(0.95 * stage[0])
    return report


def _metadata(ctx: JobContext, base: Version, dataset: Version, report: dict[str, Any],
              execution: dict[str, Any] | None) -> dict[str, Any]:
    source = base.metadata or {}
    user = ctx.job.requester
    metric = report["metric"]
    final, before = report["final"], report["base"]
    metrics = {f"validation_{k}": v for k, v in final.items()} | {f"base_validation_{k}": v for k, v in before.items()}
    meta: dict[str, Any] = {
        "title": f"{source.get('title') or base.artifact.name} fine-tuned on {dataset.artifact.full_name}"[:300],
        "description": (f"{base} ({base.pid}) fine-tuned on {dataset} ({dataset.pid}) to predict "
                        f"{ctx.job.params['hyper']['target']!r}; validation {metric} {before[metric]:.4g} -> "
                        f"{final[metric]:.4g} after {len(report['history'])} epoch(s). {report['curve']}"),
        "creators": [{"name": user.get_full_name() or user.username}],
        "license": source.get("license") or "CC-BY-4.0",
        "task": source.get("task") or ("classification" if report["task"] == "classification" else "regression"),
        "keywords": sorted({*source.get("keywords", []), "fine-tuned"})[:50],
        "learning_type": "supervised",
        "is_tunable": True,
        "hyperparameters": report["hyperparameters"],
        "metrics": metrics,
        "inputs": report["inputs"],
        "sample_inputs": "sample_inputs.npz",
        "job": str(ctx.job.pk),
        "training": {key: report[key] for key in ("family", "format", "task", "classes", "strategy", "history",
                                                  "epoch_kept", "stopped_early", "rows", "data_file", "parameters",
                                                  "libraries", "hardware", "curve", "seconds")}
                    | {"target": ctx.job.params["hyper"]["target"], "seed": report["hyperparameters"]["seed"],
                       "base": base.pid, "dataset": dataset.pid, "sandbox": report["sandbox"],
                       "worker": ctx.job.worker, "device": ctx.job.device},
    }
    if execution:
        meta["execution"] = execution  # where it ran (a Slurm job: node, partition, when)
    if metric == "accuracy":
        meta["accuracy"] = final["accuracy"]
    for key in ("model_family", "subject", "discipline", "target_application"):
        if source.get(key):
            meta[key] = source[key]
    return meta


def _publish(ctx: JobContext, base: Version, dataset: Version, files, report: dict[str, Any],
             execution: dict[str, Any] | None = None) -> Version:
    """The artifact (made on first use) and its version together, or neither."""
    output = ctx.job.params["output"]
    user = ctx.job.requester
    refs = [ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, base),
            ProvenanceRef(ProvenanceLink.Relation.TRAINED_ON, dataset)]
    try:
        with transaction.atomic():
            artifact = Artifact.objects.live().filter(owner=user, name=output["name"]).first()
            if artifact is None:
                artifact = registry.create_artifact(
                    user, kind=Artifact.Kind.MODEL, name=output["name"], visibility=output["visibility"],
                    title=f"{base.artifact.name} fine-tuned",
                    description=f"Fine-tuned from {base.artifact.full_name} by the hub.")
            elif artifact.kind != Artifact.Kind.MODEL:
                raise CodedError("already_exists", f"{artifact.full_name} became a {artifact.kind}; nothing was "
                                                   "published.")
            version = registry.create_version(artifact, user, files=files, metadata=_metadata(ctx, base, dataset,
                                                                                               report, execution),
                                              provenance=refs, system=True)
    except HubError as exc:
        if exc.error_code == "duplicate_version":  # the same config and seed ran before: point at its result
            ctx.log(f"the fine-tuned files are identical to {exc.extra['existing']} ({exc.extra['existing_pid']}); "
                    "nothing new was published")
            return Version.objects.get(pid=exc.extra["existing_pid"])
        raise
    ctx.log(f"published {version} ({version.pid}); its conversion to ONNX is queued")
    return version


@register
class FinetuneJob(JobKind):
    """Fine-tune a model on a dataset in the conversion sandbox; publish the result (converted to ONNX after).
    On Slurm, the new version is published by the same function, with the Slurm job's node, partition and
    times in its metadata."""

    name = "finetune"
    label = "fine-tuning"
    queue = DEVICE

    def run(self, ctx: JobContext) -> dict[str, Any]:
        base, dataset, done = sources(ctx)
        if done is not None:
            ctx.log(f"already published as {done}")
            return {"version": str(done), "pid": done.pid}
        workdir = Path(tempfile.mkdtemp(prefix="hpcfair-finetune-"))
        try:
            request = stage_files(ctx, base, dataset, workdir)
            report = run_request(request, workdir, limits(), hidden_paths(), _reporter(ctx))
            return publish_finetuned(ctx, base, dataset, workdir, report)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def stage(self, job: Job, folder: Path) -> Plan | None:
        ctx = JobContext(job)
        base, dataset, done = sources(ctx)
        if done is not None:
            return None  # a retried job that published already: run() answers at once
        (folder / "work").mkdir()
        request = stage_files(ctx, base, dataset, folder / "work")
        return sandbox_plan("sandbox", f"fine-tune {base} on {dataset}", limits(), request=request)

    def publish(self, job: Job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        ctx = JobContext(job)
        base, dataset, _ = sources(ctx)
        return publish_finetuned(ctx, base, dataset, folder / "work", node_result(folder)["report"], execution)
