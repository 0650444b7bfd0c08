"""The gateway's database side: which ONNX file answers for a version (``resolve_model``), whether a chain's
links fit the models, and the jobs for long runs, batch runs over datasets, merges and benchmarks. The
synchronous run itself is ``hub.gateway.pipeline``. Nothing here loads a model: the workers do
(``workers.gateway``, ``hub.gateway.jobs.infer``)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from hpcfair import chain

from hub.conversions.services import conversions_of
from hub.errors import HubError
from hub.gateway.presence import alive as _alive
from hub.gateway.presence import get_presence
from hub.gateway.protocol import ModelRef, Options, no_worker, steps_of
from hub.jobs.executors import executor_for
from hub.jobs.files import drop_staged_inputs, stage_input
from hub.jobs.models import Job
from hub.jobs.quota import check_active_jobs
from hub.jobs.services import create_job
from hub.metadata import scientific
from hub.registry.files_access import require_files_of
from hub.registry.links import file_url
from hub.registry.models import Artifact, Version
from hub.registry.rule import SPELLED
from hub.registry.services import check_visibility, covers, resolve_version_ref

# --- which model answers -------------------------------------------------------------------------------


def _onnx_files(version: Version) -> list:
    return [f for f in version.files.all() if f.path.lower().endswith(".onnx")]


def _conversion_of(version: Version) -> Version | None:
    return conversions_of(version).first()


def _not_converted(version: Version) -> HubError:
    job = version.jobs.filter(kind="convert").order_by("-created").first()
    if job is None:
        return HubError("not_runnable", f"{version} has no ONNX file and no conversion; request one with "
                                        "POST …/convert.")
    if job.state == Job.State.FAILED:
        return HubError("not_runnable", f"{version} could not be converted to ONNX: {job.error_detail}",
                        job=str(job.pk))
    return HubError("not_ready", f"{version} is still being converted to ONNX (job {job.pk}, {job.state}); "
                                 f"`hpcfair jobs wait {job.pk}` returns when it has finished.", job=str(job.pk))


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
                    outputs=signature.get("outputs"), beside=_beside(holder, onnx_file.path))


def _beside(version: Version, onnx_path: str) -> tuple[tuple[str, str, int], ...]:
    """The version's files that are not ONNX models under ``onnx_path``'s folder, relative to it: the data
    files its weights may name (ONNX external data); the worker takes only those the graph names."""
    folder = onnx_path.rpartition("/")[0]
    prefix = f"{folder}/" if folder else ""
    return tuple(sorted((f.path[len(prefix):], f.blob_id, f.size) for f in version.files.all()
                        if f.path.startswith(prefix) and not f.path.lower().endswith(".onnx")))


def model_of(user, version: Version, file: str = "") -> ModelRef:
    """``version``'s ONNX file for ``user``, who must be allowed its files (``hub.registry.files_access``)."""
    require_files_of(user, version)
    return resolve_model(version, file)


def model_for(user, ref: str, file: str = "") -> ModelRef:
    """``owner/name[@version]`` or a PID, readable by ``user``, to its ONNX file (403 ``access_restricted``
    when its files are restricted to others)."""
    version = resolve_version_ref(user, ref)
    require_files_of(user, version)
    return resolve_model(version, file)


def alive(device: str) -> bool:
    return _alive(get_presence(), device)


# --- jobs ----------------------------------------------------------------------------------------------


def published_file_url(version: Version, path: str) -> str:
    """The download URL of a file a gateway job published (its result links to it); for the workers, which
    do not reach into the API layer themselves."""
    return file_url(version, path)


def _stage_inputs(job_id: uuid.UUID, arrays: dict[str, np.ndarray]) -> None:
    """The request's inputs into the object store, where the worker that takes the job (on any node) reads
    them: nothing on this web node's disk."""
    stage_input(job_id, "inputs.npz", lambda path: np.savez(path, **arrays))


def start_infer_job(user, models: list[ModelRef], options: Options, *, links: list[dict[str, str]] | None = None,
                    arrays: dict[str, np.ndarray] | None = None, dataset: Version | None = None,
                    dataset_file: str = "", batch_size: int = 0, reason: str = "") -> Job:
    """A job that runs a model (or a chain) on inputs sent now (staged) or on a dataset version's file, and
    publishes the outputs as a new version of a dataset artifact with provenance. Only a person's request
    starts one (``hub.gateway.pipeline``), so their job quota is checked here."""
    check_active_jobs(user)
    if options.device == "gpu" and options.if_no_worker == "refuse" and not alive("gpu") \
            and not executor_for("infer").batch:  # a batch gpu partition needs no gpu worker here
        raise no_worker("gpu")
    params: dict[str, Any] = {"steps": steps_of(models, links), "threads": options.threads,
                              "outputs": options.outputs, "batch_size": batch_size, "reason": reason}
    if dataset is not None:
        params["dataset"] = {"version_id": dataset.pk, "file": dataset_file}
    job_id, staged = uuid.uuid4(), False
    try:  # the inputs are staged first, under the job's id: the quota's lock is held for the row's INSERT only
        if arrays is not None:
            _stage_inputs(job_id, arrays)
            staged = True
            params["inputs"] = "inputs.npz"
        return create_job("infer", user, version=Version.objects.get(pk=models[0].named_id), params=params,
                          device=options.device, limited=True, job_id=job_id,
                          account=options.account or None)
    except BaseException:
        if staged:
            drop_staged_inputs(job_id)
        raise


# --- collaboration ---------------------------------------------------------------------------------------


_LINK_ERRORS = {"count": "Needed.", "unknown_input": "Unknown name.", "unknown_output": "Unknown name.",
                "unmapped": "Incomplete."}


def check_links(models: list[ModelRef], links: Any) -> list[dict[str, str]]:
    """``links[i]`` maps inputs of model i+1 to outputs of model i; empty means "by position"
    (``hpcfair.chain``). Checked against the signatures where they are recorded."""
    if links is None:
        links = [{} for _ in models[1:]]
    if not isinstance(links, list) or len(links) != len(models) - 1 or not all(
            isinstance(item, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in item.items())
            for item in links):
        raise HubError("invalid", f"links is a list of {len(models) - 1} mapping(s), one per joint: "
                                  '[{"<input of the next model>": "<output of the model before>"}].',
                       errors={"links": ["Expected a list of mappings."]})
    for index, link in enumerate(links):
        before, after = models[index], models[index + 1]
        try:
            chain.joint(link, [o["name"] for o in before.outputs or []] or None,
                        [i["name"] for i in after.inputs or []] or None, before=before.name, after=after.name,
                        where=f"links[{index}]")
        except chain.ChainError as exc:
            raise HubError("invalid", str(exc), errors={"links": [_LINK_ERRORS[exc.reason]]})
    return links


def start_merge_job(user, models: list[ModelRef], links: list[dict[str, str]], *, name: str, title: str = "",
                    license: str = "", task: str = "", visibility: str = "") -> Job:
    """Merge a chain into one ONNX model (``onnx.compose``), published as ``user/name`` with provenance."""
    from hub.registry.models import NAME_RE

    check_active_jobs(user)
    if not name or not re.match(NAME_RE, name):
        raise HubError("invalid", "A merged model needs a name: letters, digits, . _ - (up to 100).",
                       errors={"name": ["Required." if not name else "Invalid name."]})
    if Artifact.objects.live().filter(owner=user, name=name).exists():
        raise HubError("already_exists", f"You already have an artifact named {user.username}/{name}.")
    parents = list(Version.objects.filter(pk__in=[m.version_id for m in models]).select_related("artifact"))
    private = any(not v.artifact.is_public for v in parents)
    visibility = visibility or ("private" if private else "public")
    if visibility not in Artifact.Visibility.values:
        raise HubError("invalid", f"visibility is {SPELLED}.",
                       errors={"visibility": ["Unknown value."]})
    check_visibility(user, visibility)
    if stricter := [v.artifact.full_name for v in parents if not covers(v.artifact, visibility, user.pk)]:
        raise HubError("permission_denied", f"A model merged from {stricter[0]} carries its weights: it can be "
                                            f"{visibility} only if {stricter[0]} is at least as open: it stays "
                                            "private.")
    licenses = {(v.metadata or {}).get("license") for v in parents}
    if not license and len(licenses) != 1:
        raise HubError("invalid", f"The models have different licenses ({', '.join(sorted(map(str, licenses)))}); "
                                  "choose the merged model's license.", errors={"license": ["Required."]})
    params = {"steps": steps_of(models, links), "name": name, "title": title, "license": license or licenses.pop(),
              "task": task, "visibility": visibility}
    return create_job("collaborate", user, version=Version.objects.get(pk=models[0].named_id), params=params,
                      limited=True)


def dataset_input(user, ref: str, file: str) -> tuple[Version, str]:
    """A dataset version and the .npy/.npz file of it to run over."""
    version = resolve_version_ref(user, ref)
    require_files_of(user, version)
    if file and scientific.variable_input(version.metadata or {}, file) is not None:
        return version, file  # a variable of an HDF5/NetCDF/Zarr file: tas.nc:/tas
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
    check_active_jobs(user)
    if options.if_no_worker == "refuse" and not alive(options.device):
        raise no_worker(options.device)
    params = {"steps": steps_of([model]), "batch_sizes": batch_sizes, "runs": runs, "warmup": min(10, runs),
              "threads": options.threads}
    return create_job("benchmark", user, version=Version.objects.get(pk=model.named_id), params=params,
                      device=options.device, limited=True)
