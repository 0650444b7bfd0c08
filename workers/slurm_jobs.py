"""The hub's side of the job kinds that run on Slurm (``hub.jobs.slurm.KINDS``): ``prepare`` puts a job's
inputs into its job folder for ``hpcfair.slurm_runner`` on a compute node, ``finish`` publishes what the
node wrote, exactly as the Celery path publishes it. Both run in a Celery worker on a login node."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from hpcfair.compute import CodedError

from hub.gateway.services import staging_dir
from hub.jobs.models import Job
from hub.jobs.slurm import Plan
from hub.registry.models import Artifact, ProvenanceLink, Version
from hub.storage import StorageUnavailable, get_blob_store
from workers.runner import JobContext

if TYPE_CHECKING:
    from hpcfair.convert import Limits


def place(blob_id: str, target: Path) -> Path:
    """A blob as ``target``: a hard link where the store is a local filesystem on the same device, else a
    copy (the job folder must be on a filesystem the compute nodes see)."""
    store = get_blob_store()
    local = store.local_path(blob_id)
    if local is not None:
        try:
            os.link(local, target)
            return target
        except OSError:
            pass
    try:
        with store.open(blob_id) as stream, open(target, "wb") as out:
            shutil.copyfileobj(stream, out, 8 * 1024 * 1024)
    except (FileNotFoundError, StorageUnavailable) as exc:
        raise CodedError("storage_unavailable", f"A file of this job could not be read from the object store: {exc}")
    return target


def _failure(exc: CodedError) -> CodedError:
    return CodedError(exc.code, exc.detail)


class InferKind:
    """Batch inference: a job array, one shard of the rows per task (``worker_num`` tasks); the parts are
    concatenated in task order, so the output equals a single run's."""

    def prepare(self, job: Job, folder: Path) -> Plan:
        from workers.infer import step_versions

        params = job.params
        try:
            models = step_versions(params["steps"])
        except CodedError as exc:
            raise _failure(exc)
        steps = []
        for index, step in enumerate(params["steps"]):
            place(step["sha256"], folder / f"model-{index}.onnx")
            steps.append({"model": f"model-{index}.onnx", "links": step.get("links") or {}})
        if params.get("inputs"):
            source = staging_dir(job.pk) / params["inputs"]
            if not source.exists():
                raise CodedError("gone", "The inputs of this job are no longer staged; send the request again.")
            inputs = folder / f"inputs{source.suffix}"
            shutil.copyfile(source, inputs)
            what = "inputs sent with the request"
        else:
            dataset = Version.objects.filter(pk=params["dataset"]["version_id"], deleted_at__isnull=True).first()
            if dataset is None:
                raise CodedError("gone", "The input dataset version was deleted before the job ran.")
            file = dataset.files.get(path=params["dataset"]["file"])
            inputs = place(file.blob_id, folder / f"inputs{Path(file.path).suffix}")
            what = f"{dataset} {file.path}"
        tasks = max(1, min(int(params.get("threads") or 1), settings.HUB_SLURM_MAX_ARRAY))
        spec = {"kind": "infer", "steps": steps, "inputs": inputs.name, "device": job.device,
                "input_specs": (models[0].metadata or {}).get("inputs"), "outputs": params.get("outputs") or [],
                "batch_size": int(params.get("batch_size") or 0), "batch_budget": settings.HUB_INFER_BATCH_BYTES,
                "threads": 1,
                "inflate_limit": settings.HUB_ARCHIVE_INFLATE_MAX_BYTES}
        chain = " -> ".join(map(str, models))
        return Plan(spec, tasks=tasks, cpus=1, summary=f"{chain} on {what}, {tasks} shard(s)")

    def finish(self, job: Job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        import numpy as np
        from hpcfair import archives

        from hub.gateway.services import published_file_url
        from workers.infer import publish_outputs, step_versions

        parts: dict[str, list[np.ndarray]] = {}
        for index in range(job.slurm["tasks"]):
            path = folder / "out" / f"part-{index}.npz"
            if not path.exists():
                continue  # a task with no rows (more tasks than rows)
            try:
                arrays = archives.read_npz(path, settings.HUB_ARCHIVE_INFLATE_MAX_BYTES, path.name)
            except (ValueError, OSError, zipfile.BadZipFile) as exc:
                raise CodedError("invalid_outputs", f"Task {index}'s outputs cannot be read: {exc}")
            for name, value in arrays.items():
                parts.setdefault(name, []).append(value)
        outputs = {name: np.concatenate(values) for name, values in parts.items()}
        if not outputs:
            raise CodedError("invalid_inputs", "The input dataset has no rows; nothing was computed.")
        params = job.params
        ctx = JobContext(job)
        try:
            models = step_versions(params["steps"])
            dataset = None
            if params.get("dataset"):
                dataset = Version.objects.filter(pk=params["dataset"]["version_id"]).first()
            info = {"device": job.device, "provider": _provider(folder, job.slurm["tasks"]),
                    "run_ms": round((execution.get("elapsed_s") or 0) * 1e3, 3)}
            published = publish_outputs(ctx, models, dataset, outputs, info, folder / "out", execution=execution)
        except CodedError as exc:
            raise _failure(exc)
        ctx.log(f"published the outputs as {published} ({published.pid})")
        shutil.rmtree(staging_dir(job.pk), ignore_errors=True)
        return {**info, "version": str(published), "pid": published.pid,
                "outputs": {name: {"shape": list(a.shape), "dtype": a.dtype.name} for name, a in outputs.items()},
                "file": published_file_url(published, "outputs.npz")}


def _provider(folder: Path, tasks: int) -> str:
    for index in range(tasks):
        try:
            return json.loads((folder / "out" / f"result-{index}.json").read_text())["provider"]
        except (OSError, ValueError, KeyError):
            continue
    return "CPUExecutionProvider"


class CubeKind:
    """A project's MLCube run (build its image offline and run the tasks asked for) with the node's container
    engine; a model's cube (generated and checked against the gateway) stays on Celery."""

    def prepare(self, job: Job, folder: Path) -> Plan | None:
        from workers.container import _image_name, stage_project

        source = job.version
        if source is None or source.is_deleted:
            raise CodedError("gone", "The version was deleted before it could be processed.")
        tasks = job.params.get("tasks") or []
        if source.artifact.kind != Artifact.Kind.PROJECT or job.params.get("build") == "no" or not tasks:
            return None
        project = folder / "project"
        try:
            cube, spec = stage_project(source, project, lambda file, target: place(file.blob_id, target), tasks)
        except CodedError as exc:
            raise _failure(exc)
        if cube != project:  # the runner builds folder/project: the unzipped cube takes its place
            shutil.rmtree(project)
            cube.rename(project)
        image = _image_name(source)
        return Plan({"kind": "cube", "image": image, "tasks": tasks, "engine": settings.HUB_CUBE_ENGINE,
                     "wheels": str(settings.HUB_CUBE_WHEELS), "build_timeout": settings.HUB_CUBE_BUILD_TIMEOUT_S,
                     "run_timeout": settings.HUB_CUBE_RUN_TIMEOUT_S, "containers_conf": settings.HUB_CONTAINERS_CONF,
                     "mlcube": spec.summary()},
                    summary=f"MLCube {spec.name}: build {image}, run {', '.join(tasks)}")

    def finish(self, job: Job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        spec = json.loads((folder / "job.json").read_text())
        return {"mlcube": spec["mlcube"], **{k: v for k, v in _result_of(folder).items() if k != "task"}}


def _sandboxed(job: Job) -> tuple[JobContext, Version]:
    """The context and source version of a job whose work runs in the conversion sandbox."""
    from workers.convert import _source

    ctx = JobContext(job)
    try:
        return ctx, _source(ctx)
    except CodedError as exc:
        raise _failure(exc)


def _sandbox_plan(runner_kind: str, summary: str, limits: Limits | None = None, **fields: Any) -> Plan:
    """A plan for the runner's sandboxed kinds: the hub's limits (a conversion's unless given) and the paths
    the child must not see."""
    from dataclasses import asdict

    from workers.convert import hidden_paths
    from workers.convert import limits as conversion_limits

    return Plan({"kind": runner_kind, "limits": asdict(limits or conversion_limits()),
                 "hide": [str(path) for path in hidden_paths()], **fields},
                cpus=max(1, settings.HUB_CONVERT_THREADS), summary=summary)


def _result_of(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "out" / "result-0.json").read_text())


class OptimizeKind:
    """ONNX Runtime optimisation and quantisation in the conversion sandbox (bubblewrap where the node has it,
    the hub's limits), on a node; published as on Celery."""

    def prepare(self, job: Job, folder: Path) -> Plan | None:
        from workers.convert import _existing_result, optimize_request

        ctx, source = _sandboxed(job)
        if _existing_result(ctx, source, ProvenanceLink.Relation.DERIVED_FROM):
            return None  # a retried job that published already: Celery's path answers at once
        (folder / "work").mkdir()
        request = optimize_request(ctx, source, folder / "work")
        return _sandbox_plan("sandbox", f"optimise {source} {job.params['file']}", request=request)

    def finish(self, job: Job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        from workers.convert import publish_optimized

        ctx, source = _sandboxed(job)
        try:
            return publish_optimized(ctx, source, folder / "work", _result_of(folder)["report"])
        except CodedError as exc:
            raise _failure(exc)


class ConvertKind:
    """Conversions to ONNX and verifications, each file in the conversion sandbox on a node (with the hub's
    limits); the ONNX version is published, and its cube queued, as on Celery."""

    def prepare(self, job: Job, folder: Path) -> Plan | None:
        from workers.convert import _existing_result, conversion_plan

        ctx, source = _sandboxed(job)
        if job.kind == Job.Kind.CONVERT and _existing_result(ctx, source, ProvenanceLink.Relation.CONVERTED_FROM):
            return None  # a retried job that published already: Celery's path answers at once
        (folder / "work").mkdir()
        plan = conversion_plan(ctx, source, folder / "work")
        return _sandbox_plan("convert", f"{job.get_kind_display()} of {source}: "
                                        f"{', '.join(f['path'] for f in plan['files'])}", plan=plan)

    def finish(self, job: Job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        from workers.convert import publish_conversion

        ctx, source = _sandboxed(job)
        plan = json.loads((folder / "job.json").read_text())["plan"]
        try:
            return publish_conversion(ctx, source, folder / "work", plan, _result_of(folder)["reports"])
        except CodedError as exc:
            raise _failure(exc)


class FinetuneKind:
    """Fine-tuning in the conversion sandbox on a node (the fine-tune's time limits); the new version is
    published by the Celery path's own function, with the Slurm job's node, partition and times in its
    metadata."""

    def prepare(self, job: Job, folder: Path) -> Plan | None:
        from workers.finetune import limits, sources, stage

        ctx = JobContext(job)
        try:
            base, dataset, done = sources(ctx)
        except CodedError as exc:
            raise _failure(exc)
        if done is not None:
            return None  # a retried job that published already: Celery's path answers at once
        (folder / "work").mkdir()
        request = stage(ctx, base, dataset, folder / "work")
        return _sandbox_plan("sandbox", f"fine-tune {base} on {dataset}", limits=limits(), request=request)

    def finish(self, job: Job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        from workers.finetune import publish_finetuned, sources

        ctx = JobContext(job)
        try:
            base, dataset, _ = sources(ctx)
            return publish_finetuned(ctx, base, dataset, folder / "work", _result_of(folder)["report"], execution)
        except CodedError as exc:
            raise _failure(exc)


CONVERT = ConvertKind()
FINETUNE = FinetuneKind()
INFER = InferKind()
CUBE = CubeKind()
OPTIMIZE = OptimizeKind()
