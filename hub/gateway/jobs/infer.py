"""Inference jobs: a model run over inputs staged by the web (a long request) or over a dataset
version's .npy/.npz file (a batch run), in batches with progress, stopped at ``HUB_INFER_JOB_S``. The
outputs are published as a new version of the requester's ``<model>-outputs`` dataset, with provenance
to the model version and the input dataset."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from hpcfair import archives
from hpcfair.compute import CodedError
from hpcfair.compute.runs import batch_rows, row_count, run_rows
from hpcfair.convert import ConversionError
from hpcfair.convert.signature import load_sample_inputs, specs_from_metadata
from hpcfair.scidata import mapped_extent

from hub.errors import HubError
from hub.gateway.engine import describe, run_steps
from hub.gateway.services import published_file_url
from hub.gateway.sessions import gpu_available, needed_bytes
from hub.gateway.tensors import check
from hub.jobs.files import drop_staged_inputs, fetch, input_path, place_file, place_model, staged, staged_input
from hub.jobs.kinds import DEVICE, JobKind, Plan, register
from hub.jobs.models import Job
from hub.jobs.runner import JobContext
from hub.jobs.toolkit import results_artifact
from hub.metadata import scientific
from hub.registry import services as registry
from hub.registry.models import ProvenanceLink, Version
from hub.registry.services import ProvenanceRef


def session_for(ctx: JobContext, model: dict[str, Any]) -> dict[str, Any]:
    """The model loaded in this thread's engine: its ``inputs``, ``outputs`` and ``provider``."""
    device = ctx.job.device
    if device == "gpu" and not gpu_available():
        raise CodedError("gpu_unavailable", "This worker consumes the gpu queue but has no CUDA execution provider; "
                                            "nothing was run.")
    return describe(model, device, int(ctx.job.params.get("threads") or 0))


def step_versions(steps: list[dict[str, Any]]) -> list[Version]:
    found = {v.pk: v for v in Version.objects.filter(pk__in=[s["version_id"] for s in steps], deleted_at__isnull=True)
             .select_related("artifact__owner")}
    if len(found) != len({s["version_id"] for s in steps}):
        raise CodedError("gone", "A model version of this job was deleted before the job ran.")
    return [found[s["version_id"]] for s in steps]


def mapped_source(path: Path, arrays: dict[str, np.ndarray], extent: dict[str, Any] | None = None
                  ) -> dict[str, Any] | None:
    """Where the engine may read the inputs itself, by mapping the file: a one-input ``.npy``, or a variable's
    ``extent`` in its own file (``hpcfair.scidata.stored_extent``), whose checked array is the file's own
    content (nothing was cast); None otherwise."""
    if (path.suffix != ".npy" and extent is None) or len(arrays) != 1:
        return None
    ((name, array),) = arrays.items()
    try:
        mapped = mapped_extent(path, extent) if extent else np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    same = mapped.dtype == array.dtype and mapped.shape == array.shape and mapped.flags.c_contiguous
    return {"path": str(path), "name": name, **({"extent": extent} if extent else {})} if same and array.ndim else None


def dataset_file(dataset: Version, name: str, folder: Path, streamed: bool = False
                 ) -> tuple[Path, scientific.VariableStream | None]:
    """The input file of a run over ``dataset``: the file ``name`` (linked where the store allows: read here
    and by the engine), or for ``tas.nc:/tas`` the variable, read from the file in the sandbox and written as
    ``inputs.npy`` (which the engine then maps and reads batch by batch). ``streamed``: back as soon as that
    ``.npy`` exists, with the stream whose ``wait(rows)`` says when rows have landed; else once it is whole."""
    found = scientific.variable_input(dataset.metadata or {}, name)
    if found is None:
        return fetch(dataset, name, folder, link=True), None
    unit, variable = found
    copies = folder / "scidata"
    copies.mkdir()
    members = []
    for index, file in enumerate(f for f in dataset.files.order_by("path")
                                 if f.path == unit or f.path.startswith(unit + "/")):
        members.append((file.path, place_file(file, copies / str(index))))
    stream = scientific.VariableStream(unit, members, variable, folder / "inputs.npy", cleanup=copies,
                                       in_place=streamed).start()
    if not streamed:
        stream.wait(sys.maxsize)
    return stream.dest, stream if streamed else None


def _inputs(ctx: JobContext, model_version: Version, folder: Path
            ) -> tuple[dict[str, np.ndarray], Version | None, dict[str, str] | None, Callable[[int], None] | None]:
    """The job's arrays, its dataset, the engine's mapped source and, for a variable read as it runs, the
    wait for its rows (None: all there)."""
    params = ctx.job.params
    spec = (model_version.metadata or {}).get("inputs")
    stream = None
    if params.get("inputs"):
        path = staged_input(ctx.job.pk, params["inputs"], folder)
        dataset = None
    else:
        dataset = Version.objects.filter(pk=params["dataset"]["version_id"], deleted_at__isnull=True).first()
        if dataset is None:
            raise CodedError("gone", "The input dataset version was deleted before the job ran.")
        path, stream = dataset_file(dataset, params["dataset"]["file"], folder, streamed=True)
    arrays, source, ready = read_inputs(path, stream, spec)
    if source and "extent" in source:
        ctx.log(f"{params['dataset']['file']}: read where it lies in its file (its values are stored as they are "
                "used, one run of bytes): nothing copied")
    return arrays, dataset, source, ready


def read_inputs(path: Path, stream: scientific.VariableStream | None, spec: list[dict[str, Any]] | None
                ) -> tuple[dict[str, np.ndarray], dict[str, Any] | None, Callable[[int], None] | None]:
    """A job's checked arrays from its input file ``path`` or a variable's ``stream``, the engine's mapped
    source (``mapped_source``; None: the arrays are sent) and the wait for a streamed variable's rows."""
    specs = specs_from_metadata(spec) if spec else None
    extent = stream.extent if stream is not None else None
    try:
        if extent:  # the variable's own bytes in its file, mapped: nothing copied, nothing to wait for
            if specs and len(specs) != 1:
                raise ConversionError("invalid_sample_inputs", f"A variable is one array but the model has "
                                                               f"{len(specs)} inputs.")
            path = stream.file
            loaded = {specs[0].name if specs else "input": mapped_extent(path, extent)}
        else:
            loaded = load_sample_inputs(path, specs, settings.HUB_ARCHIVE_INFLATE_MAX_BYTES, mapped=True)
        if stream is not None and any(a.dtype != np.dtype(s.get("dtype") or "float32")
                                      for a, s in zip(loaded.values(), spec or [], strict=False)):
            stream.wait(sys.maxsize)  # a cast reads every row: after the last has landed
        arrays = check(loaded, spec)
        source = mapped_source(path, arrays, extent)
    except ConversionError as exc:
        raise CodedError("invalid_inputs", exc.detail)
    except ValueError as exc:  # an extent outside its file
        raise CodedError("scientific_unreadable", f"The variable could not be mapped: {exc}.")
    if stream is not None and source is None:
        stream.wait(sys.maxsize)
    return arrays, source, stream.wait if stream is not None else None


def run_batches(ctx: JobContext, session: dict[str, Any], arrays: dict[str, np.ndarray], batch_size: int,
                outputs: list[str] | None, steps: list[dict[str, Any]],
                source: dict[str, str] | None = None, ready: Callable[[int], None] | None = None
                ) -> dict[str, np.ndarray]:
    """Run the chain along the first axis in batches of ``batch_size`` rows (0: as many as fit
    ``HUB_INFER_BATCH_MB`` of inputs); a first model with a fixed first axis gets batches of that size.
    With ``source`` (``mapped_source``) the engine reads each batch from the file itself; ``ready(stop)``
    returns once rows up to ``stop`` are there (a variable still being read)."""
    total = row_count(arrays)
    batch_size = batch_rows([shape for _, shape, _ in session["inputs"]], arrays, batch_size,
                            settings.HUB_INFER_BATCH_BYTES)
    threads = int(ctx.job.params.get("threads") or 0)
    deadline = time.time() + settings.HUB_INFER_JOB_S

    def run(start: int, stop: int) -> dict[str, np.ndarray]:
        if ready is not None:
            ready(stop)
        feeds = {} if source else {name: array[start:stop] for name, array in arrays.items()}
        rows_source = {**source, "rows": [start, stop]} if source else None
        result, _ = run_steps(steps, feeds, device=ctx.job.device, threads=threads, deadline=deadline,
                              outputs=outputs, deadline_is_long=True, source=rows_source)
        return result

    merged = run_rows(run, 0, total, batch_size, deadline=deadline, limit_s=settings.HUB_INFER_JOB_S,
                      on_batch=lambda start, stop: ctx.progress(0.05 + 0.85 * stop / total))
    ctx.log(f"ran {total} row(s) in batches of {batch_size}")
    return merged


def publish_outputs(ctx: JobContext, models: list[Version], dataset: Version | None,
                    outputs: dict[str, np.ndarray], info: dict[str, Any], folder: Path,
                    execution: dict[str, Any] | None = None) -> Version:
    model_version = models[0]
    user = ctx.job.requester
    artifact = results_artifact(user, model_version)
    done = artifact.versions.filter(deleted_at__isnull=True, metadata__job=str(ctx.job.pk)).first()
    if done is not None:
        return done  # a retried job published already
    path = folder / "outputs.npz"
    np.savez(path, **outputs)
    source = model_version.metadata or {}
    chain = " -> ".join(str(v) for v in models)
    metadata = {
        "title": f"Outputs of {chain} on {dataset if dataset else 'inputs sent by ' + user.username}",
        "description": f"Outputs of {chain} ({', '.join(v.pid for v in models)}) computed on {info['device']} "
                       f"({info['provider']}) by job {ctx.job.pk}.",
        "creators": [{"name": user.get_full_name() or user.username}],
        "license": source.get("license") or "CC-BY-4.0",
        "keywords": ["inference-output"],
        "job": str(ctx.job.pk),
        **({"execution": execution} if execution else {}),  # where it ran (a batch job: hub.jobs.executors)
    }
    refs = [ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, version) for version in dict.fromkeys(models)]
    if dataset is not None:
        refs.append(ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, dataset))
    try:
        return registry.create_version(artifact, user, files=[staged(path, "outputs.npz")], metadata=metadata,
                                       provenance=refs, system=True)
    except HubError as exc:
        if exc.error_code == "duplicate_version":  # the same outputs exist already: point at them
            return Version.objects.get(pid=exc.extra["existing_pid"])
        raise


@register
class InferJob(JobKind):
    """Run a model or a chain over staged inputs or a dataset version's file in batches; publish the outputs
    as a dataset version. On Slurm: a job array, one shard of the rows per task (``worker_num`` tasks), the
    parts joined in task order, so the output equals a single run's."""

    name = "infer"
    label = "inference"
    queue = DEVICE

    def run(self, ctx: JobContext) -> dict[str, Any]:
        params = ctx.job.params
        steps = params["steps"]
        models = step_versions(steps)
        ctx.log(f"{params.get('reason') or 'job'}: {' -> '.join(map(str, models))} on {ctx.job.device}")
        folder = Path(tempfile.mkdtemp(prefix="hpcfair-infer-"))
        try:
            sessions = [session_for(ctx, step) for step in steps]
            arrays, dataset, source, ready = _inputs(ctx, models[0], folder)
            started = time.perf_counter()
            outputs = run_batches(ctx, sessions[0], arrays, int(params.get("batch_size") or 0),
                                  params.get("outputs") or None, steps, source, ready)
            info = {"device": ctx.job.device, "provider": sessions[-1]["provider"],
                    "run_ms": round((time.perf_counter() - started) * 1e3, 3)}
            published = publish_outputs(ctx, models, dataset, outputs, info, folder)
            ctx.log(f"published the outputs as {published} ({published.pid})")
            drop_staged_inputs(ctx.job.pk)
            return _result(info, published, outputs)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def stage(self, job: Job, folder: Path) -> Plan | None:
        params = job.params
        models = step_versions(params["steps"])
        steps, weights = [], 0
        for index, step in enumerate(params["steps"]):
            model = place_model(step, folder / f"model-{index}")  # with its data files, if it has any
            weights += sum(f.stat().st_size for f in model.parent.rglob("*") if f.is_file())
            steps.append({"model": str(model.relative_to(folder)), "links": step.get("links") or {}})
        if params.get("inputs"):
            inputs = staged_input(job.pk, params["inputs"], folder)
            what = "inputs sent with the request"
        else:
            dataset = Version.objects.filter(pk=params["dataset"]["version_id"], deleted_at__isnull=True).first()
            if dataset is None:
                raise CodedError("gone", "The input dataset version was deleted before the job ran.")
            name = params["dataset"]["file"]
            if scientific.variable_input(dataset.metadata or {}, name) is not None:
                inputs = dataset_file(dataset, name, folder)[0]  # the variable, read in the sandbox, as a .npy
            else:
                file = dataset.files.get(path=name)
                inputs = input_path(file, folder / f"inputs{Path(file.path).suffix}")  # a reference: its path
            what = f"{dataset} {name}"
        tasks = max(1, min(int(params.get("threads") or 1), settings.HUB_SLURM_MAX_ARRAY))
        spec = {"compute": "infer", "steps": steps, "device": job.device,
                "inputs": inputs.name if inputs.parent == folder else str(inputs),
                "input_specs": (models[0].metadata or {}).get("inputs"), "outputs": params.get("outputs") or [],
                "batch_size": int(params.get("batch_size") or 0), "batch_budget": settings.HUB_INFER_BATCH_BYTES,
                "threads": 1, "inflate_limit": settings.HUB_ARCHIVE_INFLATE_MAX_BYTES}
        chain = " -> ".join(map(str, models))
        # a node holds the models (needed_bytes: twice their files) beside Python and onnxruntime
        need = needed_bytes(weights) // 2**20 + 256
        return Plan(spec, tasks=tasks, cpus=1, summary=f"{chain} on {what}, {tasks} shard(s)", memory_mb=need)

    def publish(self, job: Job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        parts: dict[str, list[np.ndarray]] = {}
        for index in range(job.execution["tasks"]):
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
            raise CodedError("invalid_inputs", "The inputs have no rows; nothing was computed.")
        params = job.params
        ctx = JobContext(job)
        models = step_versions(params["steps"])
        dataset = None
        if params.get("dataset"):
            dataset = Version.objects.filter(pk=params["dataset"]["version_id"]).first()
        info = {"device": job.device, "provider": _node_provider(folder, job.execution["tasks"]),
                "run_ms": round((execution.get("elapsed_s") or 0) * 1e3, 3)}
        published = publish_outputs(ctx, models, dataset, outputs, info, folder / "out", execution=execution)
        ctx.log(f"published the outputs as {published} ({published.pid})")
        drop_staged_inputs(job.pk)
        return _result(info, published, outputs)


def _result(info: dict[str, Any], published: Version, outputs: dict[str, np.ndarray]) -> dict[str, Any]:
    return {**info, "version": str(published), "pid": published.pid,
            "outputs": {name: {"shape": list(a.shape), "dtype": a.dtype.name} for name, a in outputs.items()},
            "file": published_file_url(published, "outputs.npz")}


def _node_provider(folder: Path, tasks: int) -> str:
    """The execution provider a node's task reported (``out/result-<i>.json``)."""
    for index in range(tasks):
        try:
            return json.loads((folder / "out" / f"result-{index}.json").read_text())["provider"]
        except (OSError, ValueError, KeyError):
            continue
    return "CPUExecutionProvider"
