"""The gateway's web side: which ONNX file answers for a version, synchronous calls over a lane, and
jobs for long runs, batch runs over datasets, merges and benchmarks. Nothing here loads a model: the
workers do (``workers.gateway``, ``workers.infer``)."""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from hub.conversions.services import conversions_of
from hub.errors import HubError
from hub.gateway import wire
from hub.gateway.lane import get_lane
from hub.gateway.options import DEVICES, IF_NO_WORKER, MODES
from hub.jobs.models import Job
from hub.jobs.services import create_job
from hub.jobs.slurm import runs_on_slurm
from hub.registry.models import Version
from hub.registry.services import resolve_version_ref

GRACE_S = 2.0  # a worker answers this long after a deadline at the latest (it aborts the run at the deadline)


@dataclass(frozen=True)
class ModelRef:
    """The ONNX file that answers for a version, and its signature (plain data: it is cached)."""

    version_id: int  # the version holding the ONNX file (the named one, or its conversion)
    pid: str
    name: str  # owner/name@label of that version
    named_id: int  # the version the caller named
    path: str
    sha256: str
    size: int
    inputs: list[dict[str, Any]] | None
    outputs: list[dict[str, Any]] | None

    def wire(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "path": self.path, "size": self.size}


@dataclass
class Options:
    """How to run: device, threads (``worker_num``), sync or not, what to do without a worker."""

    device: str = "cpu"
    threads: int = 0
    mode: str = "auto"
    if_no_worker: str = "refuse"
    outputs: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, values: dict[str, Any]) -> Options:
        def pick(name: str, allowed: tuple[str, ...], default: str) -> str:
            value = values.get(name) or default
            if value not in allowed:
                raise HubError("invalid", f"{name} must be one of {', '.join(allowed)}, not {value!r}.",
                               errors={name: ["Unknown value."]})
            return str(value)

        threads = values.get("threads", values.get("worker_num", 0)) or 0
        try:
            threads = int(threads)
        except (TypeError, ValueError):
            threads = -1
        if not 0 <= threads <= settings.HUB_INFER_MAX_THREADS:
            raise HubError("invalid", f"threads (worker_num) must be between 0 (the worker's default) and "
                                      f"{settings.HUB_INFER_MAX_THREADS}.", errors={"threads": ["Out of range."]})
        outputs = values.get("outputs") or []
        if isinstance(outputs, str):
            outputs = [name for name in outputs.split(",") if name]
        if not isinstance(outputs, list) or not all(isinstance(name, str) for name in outputs):
            raise HubError("invalid", "outputs is a list of output names.", errors={"outputs": ["Expected names."]})
        return cls(device=pick("device", DEVICES, "cpu"), threads=threads, mode=pick("mode", MODES, "auto"),
                   if_no_worker=pick("if_no_worker", IF_NO_WORKER, "refuse"), outputs=outputs)


# --- which model answers -------------------------------------------------------------------------------


def _onnx_files(version: Version) -> list:
    return [f for f in version.files.all() if f.path.lower().endswith(".onnx")]


def _conversion_of(version: Version) -> Version | None:
    return conversions_of(version).first()


def _not_converted(version: Version) -> HubError:
    job = version.jobs.filter(kind=Job.Kind.CONVERT).order_by("-created").first()
    if job is None:
        return HubError("not_runnable", f"{version} has no ONNX file and no conversion; request one with "
                                        "POST …/convert.")
    if job.state == Job.State.FAILED:
        return HubError("not_runnable", f"{version} could not be converted to ONNX: {job.error_detail}",
                        job=str(job.pk))
    return HubError("not_ready", f"{version} is still being converted to ONNX (job {job.pk}, {job.state}); "
                                 "try again when it has finished.", job=str(job.pk))


def resolve_model(version: Version, file: str = "") -> ModelRef:
    """The ONNX file of ``version``, or of its conversion to ONNX."""
    if version.artifact.kind != "model":
        raise HubError("not_runnable", f"{version} is a {version.artifact.kind}, not a model.")
    holder = version
    candidates = _onnx_files(version)
    if not candidates:
        holder = _conversion_of(version)
        if holder is None:
            raise _not_converted(version)
        candidates = _onnx_files(holder)
    if file:
        chosen = [f for f in candidates if f.path == file or f.path == str(Path(file).with_suffix(".onnx"))]
        if not chosen:
            raise HubError("not_found", f"{holder} has no ONNX file {file!r}; it has "
                                        f"{', '.join(f.path for f in candidates)}.")
    elif len(candidates) > 1:
        raise HubError("invalid", f"{holder} holds {len(candidates)} ONNX models; name one with 'file' "
                                  f"({', '.join(f.path for f in candidates)}).", errors={"file": ["Required."]})
    else:
        chosen = candidates
    onnx_file = chosen[0]
    metadata = holder.metadata or {}
    member = (metadata.get("members") or {}).get(onnx_file.path) if len(candidates) > 1 else None
    signature = member if isinstance(member, dict) else metadata
    return ModelRef(version_id=holder.pk, pid=holder.pid, name=str(holder), named_id=version.pk, path=onnx_file.path,
                    sha256=onnx_file.blob_id, size=onnx_file.size, inputs=signature.get("inputs"),
                    outputs=signature.get("outputs"))


def model_for(user, ref: str, file: str = "") -> ModelRef:
    """``owner/name[@version]`` or a PID, readable by ``user``, to its ONNX file."""
    return resolve_model(resolve_version_ref(user, ref), file)


# --- synchronous calls ---------------------------------------------------------------------------------


def call(steps: list[dict[str, Any]], arrays: dict[str, np.ndarray], options: Options,
         generation: bytes | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Send one request (a model, or a chain of models) to a worker and wait for its answer.

    Raises ``NoWorker`` when no worker serves the device, ``Stale`` when ``generation`` (that of the
    caller's remembered answers) is no longer current; returns the worker's meta (``ok``, ``code``,
    ``detail``, ``provider``, timings) and the output arrays."""
    limit = settings.HUB_INFER_SYNC_S
    meta = {"steps": steps, "threads": options.threads, "outputs": options.outputs,
            "deadline": time.time() + limit}
    started = time.perf_counter()
    answer = get_lane().call(options.device, wire.pack(meta, arrays), limit + GRACE_S, generation)
    if answer is None:
        raise HubError("worker_timeout", f"No worker answered within {limit + GRACE_S:.0f} s; the workers may be "
                                         "overloaded or stopped. Try again, or run it as a job (mode: async).")
    meta, outputs = wire.unpack(answer)
    meta["lane_ms"] = round((time.perf_counter() - started) * 1e3, 3)
    return meta, outputs


def worker_error(meta: dict[str, Any]) -> HubError:
    code = meta.get("code") or "internal_error"
    return HubError(code if code in _WORKER_CODES else "internal_error", meta.get("detail") or "The run failed.")


_WORKER_CODES = {"invalid_inputs", "model_load_failed", "not_runnable", "gpu_unavailable", "run_failed"}


def no_worker(device: str) -> HubError:
    what = "GPU" if device == "gpu" else "CPU"
    return HubError("no_worker", f"No {what} worker is running, so nothing can run on '{device}' now. Ask for "
                                 "if_no_worker: queue to wait for one as a job, or choose another device.",
                    device=device)


def alive(device: str) -> bool:
    return get_lane().alive(device)


# --- jobs ----------------------------------------------------------------------------------------------


def staging_dir(job_id) -> Path:
    return Path(settings.HUB_UPLOAD_DIR) / "jobs" / str(job_id)


def _stage_inputs(job: Job, arrays: dict[str, np.ndarray]) -> None:
    folder = staging_dir(job.pk)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "inputs.npz", **arrays)


def steps_of(models: list[ModelRef], links: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """The lane/job description of a chain: each model's file, and how its inputs come from the step before."""
    links = links or [{} for _ in models[1:]]
    return [{**model.wire(), "version_id": model.version_id, **({"links": links[index - 1]} if index else {})}
            for index, model in enumerate(models)]


def start_infer_job(user, models: list[ModelRef], options: Options, *, links: list[dict[str, str]] | None = None,
                    arrays: dict[str, np.ndarray] | None = None, dataset: Version | None = None,
                    dataset_file: str = "", batch_size: int = 64, reason: str = "") -> Job:
    """A job that runs a model (or a chain) on inputs sent now (staged) or on a dataset version's file, and
    publishes the outputs as a new version of a dataset artifact with provenance."""
    if options.device == "gpu" and options.if_no_worker == "refuse" and not alive("gpu") \
            and not runs_on_slurm(Job.Kind.INFER):  # Slurm's gpu partition needs no gpu worker of the hub
        raise no_worker("gpu")
    params: dict[str, Any] = {"steps": steps_of(models, links), "threads": options.threads,
                              "outputs": options.outputs, "batch_size": batch_size, "reason": reason}
    if dataset is not None:
        params["dataset"] = {"version_id": dataset.pk, "file": dataset_file}
    staged = False
    try:
        with transaction.atomic():
            job = create_job(Job.Kind.INFER, user, version=Version.objects.get(pk=models[0].named_id),
                             params=params, queue=options.device, device=options.device)
            if arrays is not None:
                _stage_inputs(job, arrays)
                staged = True
                job.params = {**params, "inputs": "inputs.npz"}
                job.save(update_fields=["params"])
    except BaseException:
        if staged:
            shutil.rmtree(staging_dir(job.pk), ignore_errors=True)
        raise
    return job


# --- collaboration ---------------------------------------------------------------------------------------


def check_links(models: list[ModelRef], links: Any) -> list[dict[str, str]]:
    """``links[i]`` maps inputs of model i+1 to outputs of model i; empty means "by position"."""
    if links is None:
        links = [{} for _ in models[1:]]
    if not isinstance(links, list) or len(links) != len(models) - 1 or not all(
            isinstance(item, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in item.items())
            for item in links):
        raise HubError("invalid", f"links is a list of {len(models) - 1} mapping(s), one per joint: "
                                  '[{"<input of the next model>": "<output of the model before>"}].',
                       errors={"links": ["Expected a list of mappings."]})
    for index, mapping in enumerate(links):
        before, after = models[index], models[index + 1]
        outputs = [o["name"] for o in before.outputs or []]
        inputs = [i["name"] for i in after.inputs or []]
        if not mapping:
            if outputs and inputs and len(outputs) != len(inputs):
                raise HubError("invalid", f"{before.name} has {len(outputs)} output(s) ({', '.join(outputs)}) and "
                                          f"{after.name} {len(inputs)} input(s) ({', '.join(inputs)}); say which "
                                          f"feeds which in links[{index}].", errors={"links": ["Needed."]})
            continue
        wrong_in = [name for name in mapping if inputs and name not in inputs]
        wrong_out = [name for name in mapping.values() if outputs and name not in outputs]
        if wrong_in or wrong_out:
            raise HubError("invalid", f"links[{index}]: "
                           + (f"{after.name} has no input {wrong_in[0]!r} (it has {', '.join(inputs)})"
                              if wrong_in else
                              f"{before.name} has no output {wrong_out[0]!r} (it has {', '.join(outputs)})") + ".",
                           errors={"links": ["Unknown name."]})
        if inputs and sorted(mapping) != sorted(inputs):
            raise HubError("invalid", f"links[{index}] must feed every input of {after.name}: "
                                      f"{', '.join(sorted(set(inputs) - set(mapping)))} unmapped.",
                           errors={"links": ["Incomplete."]})
    return links


def start_merge_job(user, models: list[ModelRef], links: list[dict[str, str]], *, name: str, title: str = "",
                    license: str = "", task: str = "", visibility: str = "") -> Job:
    """Merge a chain into one ONNX model (``onnx.compose``), published as ``user/name`` with provenance."""
    from hub.registry.models import NAME_RE, Artifact

    if not name or not re.match(NAME_RE, name):
        raise HubError("invalid", "A merged model needs a name: letters, digits, . _ - (up to 100).",
                       errors={"name": ["Required." if not name else "Invalid name."]})
    if Artifact.objects.live().filter(owner=user, name=name).exists():
        raise HubError("already_exists", f"You already have an artifact named {user.username}/{name}.")
    parents = list(Version.objects.filter(pk__in=[m.version_id for m in models]).select_related("artifact"))
    private = any(not v.artifact.is_public for v in parents)
    visibility = visibility or ("private" if private else "public")
    if visibility not in ("public", "private"):
        raise HubError("invalid", "visibility is public or private.", errors={"visibility": ["Unknown value."]})
    if private and visibility == "public":
        raise HubError("permission_denied", "A model merged from a private model stays private.")
    licenses = {(v.metadata or {}).get("license") for v in parents}
    if not license and len(licenses) != 1:
        raise HubError("invalid", f"The models have different licenses ({', '.join(sorted(map(str, licenses)))}); "
                                  "choose the merged model's license.", errors={"license": ["Required."]})
    params = {"steps": steps_of(models, links), "name": name, "title": title, "license": license or licenses.pop(),
              "task": task, "visibility": visibility}
    return create_job(Job.Kind.COLLABORATE, user, version=Version.objects.get(pk=models[0].named_id), params=params,
                      queue="convert")


def dataset_input(user, ref: str, file: str) -> tuple[Version, str]:
    """A dataset version and the .npy/.npz file of it to run over."""
    version = resolve_version_ref(user, ref)
    arrays = [f.path for f in version.files.all() if f.path.lower().endswith((".npy", ".npz"))]
    if file:
        if file not in arrays:
            raise HubError("not_found", f"{version} has no .npy/.npz file {file!r}"
                                        + (f"; it has {', '.join(arrays)}." if arrays else "."))
        return version, file
    if len(arrays) != 1:
        raise HubError("invalid", f"{version} has {len(arrays)} .npy/.npz files; name one with dataset_file."
                       if arrays else f"{version} has no .npy or .npz file to run the model over.",
                       errors={"dataset_file": ["Required."]})
    return version, arrays[0]


def start_benchmark_job(user, model: ModelRef, options: Options, *, batch_sizes: list[int], runs: int) -> Job:
    """Measure ``model`` on a worker of ``options.device`` (202 + job); refused without such a worker unless
    the caller asked to queue."""
    if options.if_no_worker == "refuse" and not alive(options.device):
        raise no_worker(options.device)
    params = {"steps": steps_of([model]), "batch_sizes": batch_sizes, "runs": runs, "warmup": min(10, runs),
              "threads": options.threads}
    return create_job(Job.Kind.BENCHMARK, user, version=Version.objects.get(pk=model.named_id), params=params,
                      queue=options.device, device=options.device)
