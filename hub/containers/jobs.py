"""MLCube jobs (kind ``container``). For an ONNX model version: generate its cube, and where this worker has
podman/docker and the base image, build the image offline, run the cube's ``infer`` with ``--network=none`` on
sample inputs and compare the outputs with the gateway's; publish the cube (zip, build log) as a version of the
project ``<name>-mlcube``, linked by provenance. For a project version: check its ``mlcube.yaml``, build its image
the same way and run the tasks asked for. Models are run only inside the container or by the gateway's session code;
this process never unpickles anything."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from hpcfair import archives
from hpcfair.compute import CodedError
from hpcfair.convert.errors import ConversionError
from hpcfair.convert.signature import generate_inputs, load_sample_inputs, specs_from_onnx
from hpcfair.cube import CubeError, CubeInfo, CubeSpec, EngineError, build, find_engine, generate, parse_dir, zip_cube
from hpcfair.cube.engine import BuildResult, engine_problem, image_exists, prepare_context, run_task
from hpcfair.cube.generate import slug, unzip_cube

from hub.containers.registry import push_as, registry_reference
from hub.containers.services import CUBE_SUFFIX, cube_of, is_built
from hub.conversions.services import sample_inputs_path
from hub.errors import HubError
from hub.jobs.files import fetch, fetch_data_files, place, staged
from hub.jobs.kinds import JobKind, Plan, register
from hub.jobs.runner import JobContext
from hub.jobs.toolkit import free_label, node_result, source_of
from hub.registry.models import Artifact, File, ProvenanceLink, Version
from hub.registry.services import ProvenanceRef, create_artifact, create_version, update_artifact

ATOL, RTOL = 1e-5, 1e-4  # the same ONNX Runtime build inside and outside: outputs should agree closely
CARRIED = ("creators", "license", "keywords", "subject", "discipline", "references", "url")


def container_engine(ctx: JobContext, build_mode: str) -> str | None:
    """The container engine to build with, None to only make the cube; CodedError when a build was
    required and cannot happen here."""
    if build_mode == "no":
        return None
    engine = find_engine(settings.HUB_CUBE_ENGINE)
    problem = None
    broken = engine_problem(engine) if engine is not None else None
    if engine is None:
        problem = ("no_container_engine", "This worker has neither podman nor docker.")
    elif broken is not None:
        problem = (broken.code, str(broken))
    elif not image_exists(engine, settings.HUB_CUBE_BASE_IMAGE):
        problem = ("no_base_image", f"The base image {settings.HUB_CUBE_BASE_IMAGE} is not on this worker; "
                                    "make it with scripts/cube-base.sh (or set HUB_CUBE_BASE_IMAGE).")
    if problem is None:
        return engine
    if build_mode == "yes":
        raise CodedError(*problem)
    ctx.log(f"not building the image: {problem[1]}", "warning")
    return None


def _model(ctx: JobContext, source: Version, workdir: Path) -> dict[str, Any]:
    build_mode = ctx.job.params.get("build", "auto")
    existing = cube_of(source)
    if existing is not None and (build_mode == "no" or is_built(existing)):
        ctx.log(f"the cube exists already: {existing} ({existing.pid})")
        return _result(existing)
    engine = container_engine(ctx, build_mode)
    if existing is not None and engine is None:
        return _result(existing)
    model_path = next(f.path for f in source.files.all() if f.path.lower().endswith(".onnx"))
    model = fetch(source, model_path, workdir)
    fetch_data_files(source, model_path, model)  # its weights, when they live beside it
    sample = _sample_inputs(ctx, source, model, workdir)
    artifact = source.artifact
    meta = source.metadata
    info = CubeInfo(name=f"{artifact.owner.username}-{artifact.name}", title=str(meta.get("title") or artifact.name),
                    description=str(meta.get("description") or ""), authors=_authors(meta.get("creators")),
                    source=source.pid, base_image=settings.HUB_CUBE_BASE_IMAGE)
    reference = registry_reference(source) if engine is not None else None  # only an image built here is pushed
    info.image = reference or image_name(source)  # the registry's name, when the image is pushed there
    cube_dir = generate(workdir / "cube" / slug(info.name), model, info, sample)
    spec = parse_dir(cube_dir)  # our own cube passes our own check
    ctx.log(f"generated the MLCube {spec.name} (image {spec.image}; GPU variant {spec.image}-gpu)")
    ctx.progress(0.2)
    container: dict[str, Any] = {"image": spec.image, "base_image": info.base_image, "built": False,
                                 "mlcube": "mlcube.yaml", "gpu": {"mlcube": "mlcube-gpu.yaml",
                                                                  "image": f"{spec.image}-gpu", "built": False}}
    extra_files = []
    if engine is not None:
        built, log_path = _build_and_check(ctx, engine, spec, cube_dir, source, model_path, workdir)
        container.update(built)
        if reference:
            container["registry"] = push_as(engine, spec.image, reference, source.artifact.owner)
            pushed = container["registry"]
            ctx.log(f"pushed {reference} ({pushed['digest']})" if pushed["pushed"] else
                    f"could not push {reference}: {pushed['error']}", "info" if pushed["pushed"] else "warning")
        extra_files.append(staged(log_path, "build.log"))
    archive = zip_cube(cube_dir, workdir / f"{spec.name}.mlcube.zip")
    cube = _publish(ctx, source, [staged(archive, archive.name), *extra_files], container)
    return _result(cube)


def image_name(version: Version) -> str:
    """The local image reference of a version's cube: ``localhost/hpcfair/<owner>-<name>:<label>``."""
    return f"localhost/hpcfair/{slug(f'{version.artifact.owner.username}-{version.artifact.name}')}:" \
           f"{slug(version.label)}"


def _build_image(ctx: JobContext, engine: str, folder: Path, build_file: str, image: str, workdir: Path,
                 lines: list[str]) -> BuildResult:
    """Build ``image`` from ``folder`` offline (wheels put into a copy of it); its output goes to ``lines``."""
    try:
        context = prepare_context(folder, workdir / "context", settings.HUB_CUBE_WHEELS, on_line=lines.append)
        ctx.log(f"building {image} with {engine} (--network=none)")
        built = build(engine, context, context / build_file, image, network="none",
                      timeout=settings.HUB_CUBE_BUILD_TIMEOUT_S, on_line=lines.append,
                      memory_mb=settings.HUB_CUBE_MEMORY_MB)
    except EngineError as exc:
        if exc.log:
            ctx.log(exc.log[-4000:], "error")
        raise CodedError(exc.code, str(exc))
    ctx.log(f"built {image}: {built.size / 1e6:.0f} MB in {built.seconds:.1f} s ({built.digest[:19]})")
    return built


def _sample_inputs(ctx: JobContext, source: Version, model: Path, workdir: Path) -> Path:
    """The uploader's sample inputs (of this version or the one it was converted from), keyed by the
    ONNX model's input names; random inputs of the signature when there are none."""
    import onnx

    specs, _ = specs_from_onnx(onnx.load(model, load_external_data=False))
    candidates = [source] + [link.target for link in source.provenance.filter(
        relation=ProvenanceLink.Relation.CONVERTED_FROM).select_related("target")]
    for version in candidates:
        path = sample_inputs_path(version)
        if path:
            (workdir / "sample").mkdir(exist_ok=True)
            local = fetch(version, path, workdir / "sample")
            try:
                arrays = load_sample_inputs(local, specs, settings.HUB_ARCHIVE_INFLATE_MAX_BYTES)
            except ConversionError as exc:
                ctx.log(f"sample inputs {path} of {version} not used: {exc.detail}", "warning")
                continue
            ctx.log(f"sample inputs: {path} of {version}")
            break
    else:
        arrays = generate_inputs(specs)
        ctx.log("sample inputs: random, from the model's signature")
    out = workdir / "sample_inputs.npz"
    np.savez(out, **arrays)
    return out


def _build_and_check(ctx: JobContext, engine: str, spec, cube_dir: Path, source: Version, model_path: str,
                     workdir: Path) -> tuple[dict[str, Any], Path]:
    """Build the image offline, run ``infer`` without network, compare with the gateway's outputs."""
    lines: list[str] = []
    built = _build_image(ctx, engine, cube_dir, spec.build_file, spec.image, workdir, lines)
    log_path = workdir / "build.log"
    log_path.write_text("\n".join(lines) + "\n")
    ctx.progress(0.7)
    run_dir = workdir / "run"
    shutil.copytree(cube_dir / "workspace", run_dir)
    try:
        ran = run_task(engine, spec.image, spec, "infer", run_dir, network="none",
                       timeout=settings.HUB_CUBE_RUN_TIMEOUT_S, memory_mb=settings.HUB_CUBE_MEMORY_MB)
    except EngineError as exc:
        raise CodedError(exc.code, str(exc))
    sample = spec.tasks["infer"].inputs["inputs"].default
    try:  # what the container wrote is untrusted: read within the archive limits
        feeds = archives.read_npz(run_dir / sample, settings.HUB_ARCHIVE_INFLATE_MAX_BYTES, sample)
        inside = archives.read_npz(run_dir / "outputs.npz", settings.HUB_ARCHIVE_INFLATE_MAX_BYTES, "outputs.npz")
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise CodedError("invalid_outputs", f"The container's outputs cannot be read: {exc}")
    reference = _gateway_outputs(source, model_path, feeds)
    check = _compare(inside, reference)
    ctx.log(f"infer in the container: {ran.seconds:.2f} s from start to output; "
            f"{'matches' if check['passed'] else 'DIFFERS FROM'} the gateway (max abs difference "
            f"{check['max_abs_diff']:.3g})", "info" if check["passed"] else "error")
    if not check["passed"]:
        raise CodedError("container_mismatch", f"The container's outputs differ from the gateway's "
                                               f"(max abs difference {check['max_abs_diff']:.3g}).")
    return {**built.record(), "engine": engine, "built": True, "network": "none",
            "check": {**check, "run_seconds": round(ran.seconds, 3), "inputs": sample}}, log_path


def _gateway_outputs(source: Version, model_path: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the gateway answers for ``feeds``: its own session cache and run code, on this worker's CPU."""
    from hub.gateway.engine import run_steps


    file = source.files.get(path=model_path)
    try:
        outputs, _ = run_steps([{"sha256": file.blob_id, "size": file.size}], feeds, device="cpu", threads=0,
                               deadline=time.time() + settings.HUB_CUBE_RUN_TIMEOUT_S, deadline_is_long=True)
    except CodedError as exc:
        raise CodedError("run_failed", f"The gateway could not run the model on the sample inputs: {exc}")
    return outputs


def _compare(inside: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> dict[str, Any]:
    if set(inside) != set(reference):
        return {"passed": False, "max_abs_diff": float("inf"),
                "problem": f"outputs {sorted(inside)} vs the gateway's {sorted(reference)}"}
    worst, passed = 0.0, True
    for name, expected in reference.items():
        actual = inside[name]
        if actual.shape != expected.shape:
            return {"passed": False, "max_abs_diff": float("inf"),
                    "problem": f"{name}: shape {list(actual.shape)} vs {list(expected.shape)}"}
        if actual.size:
            diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
            worst = max(worst, float(np.nanmax(diff)))
            passed = passed and bool(np.allclose(actual, expected, atol=ATOL, rtol=RTOL, equal_nan=True))
    return {"passed": passed, "max_abs_diff": worst, "atol": ATOL, "rtol": RTOL}


def _authors(creators: Any) -> list[dict[str, str]]:
    out = []
    for creator in creators or []:
        name = creator.get("name") if isinstance(creator, dict) else str(creator)
        if name:
            out.append({"name": str(name)})
    return out


def cube_artifact(source: Version) -> Artifact:
    owner, name = source.artifact.owner, f"{source.artifact.name}{CUBE_SUFFIX}"[:100]
    for _ in range(2):
        artifact = Artifact.objects.live().filter(owner=owner, name=name).first()
        if artifact is not None:
            if artifact.kind != Artifact.Kind.PROJECT:
                raise CodedError("already_exists", f"{owner.username}/{name} exists and is not a project; rename it "
                                                   "so that the cube can be stored there.")
            if artifact.follows_id != source.artifact_id:  # a cube made before cubes followed their model
                artifact.follows = source.artifact
                artifact.save(update_fields=["follows"])
                update_artifact(artifact, {"visibility": source.artifact.visibility},
                                list(source.artifact.collaborators.all()))
            return artifact
        try:  # it carries the model's ONNX file: it follows the model's visibility, collaborators and deletion
            return create_artifact(owner, kind=Artifact.Kind.PROJECT, name=name,
                                   title=f"MLCube of {source.metadata.get('title') or source.artifact.name}"[:300],
                                   description=f"The MLCube container of {source.artifact.full_name}: build it offline "
                                               "and run its infer task with Docker, Podman or Apptainer.",
                                   follows=source.artifact)
        except HubError:  # made meanwhile by another job
            continue
    raise CodedError("already_exists", f"{owner.username}/{name} could not be created.")


def _publish(ctx: JobContext, source: Version, files: list, container: dict[str, Any]) -> Version:
    metadata = {key: source.metadata[key] for key in CARRIED if key in source.metadata}
    metadata.update({
        "title": f"MLCube of {source.metadata.get('title') or source.artifact.name}"[:300],
        "description": f"An MLCube of {source} ({source.pid}): mlcube.yaml (CPU) and mlcube-gpu.yaml, "
                       "Containerfiles, Apptainer definitions and a workspace with the ONNX model, sample inputs "
                       "and default parameters. Its infer task runs the model with ONNX Runtime.",
        "keywords": sorted({*(source.metadata.get("keywords") or []), "mlcube", "container"})[:50],
        "container_image": container["image"],
        "container": container,
        "job": str(ctx.job.pk),
    })
    with transaction.atomic():
        artifact = cube_artifact(source)
        version = create_version(artifact, ctx.job.requester, files=files,
                                 label=free_label(artifact, source.label), metadata=metadata,
                                 provenance=[ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, source)],
                                 system=True)
    ctx.log(f"published {version} ({version.pid})")
    return version


def _result(cube: Version) -> dict[str, Any]:
    container = cube.metadata.get("container") or {}
    return {"version": str(cube), "pid": cube.pid, "owner": cube.artifact.owner.username, "name": cube.artifact.name,
            "label": cube.label, "image": container.get("image"), "built": bool(container.get("built")),
            "container": container}


# --- projects -------------------------------------------------------------------------------------


def stage_project(source: Version, project: Path, put: Callable[[File, Path], object],
                  tasks: list[str]) -> tuple[Path, CubeSpec]:
    """A project version's files under ``project`` (``put(file, target)`` writes one), unzipped into the
    sibling folder ``unpacked`` when they are a lone zip without ``mlcube.yaml``; returns the folder that holds
    the MLCube and its checked spec, which must have ``tasks``. Shared by the Celery and the Slurm paths;
    CodedError when the project is not a cube that can run them."""
    folder = project
    folder.mkdir(parents=True, exist_ok=True)
    for file in source.files.all():
        target = folder / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        put(file, target)
    zips = list(folder.glob("*.zip"))
    if not (folder / "mlcube.yaml").is_file() and len(zips) == 1:
        try:
            folder = unzip_cube(zips[0], project.parent / "unpacked", settings.HUB_ARCHIVE_INFLATE_MAX_BYTES)
        except archives.ArchiveTooLarge as exc:
            raise CodedError("archive_too_large", str(exc))
        except (ValueError, zipfile.BadZipFile) as exc:  # a member outside the folder (published before checks)
            raise CodedError("invalid_mlcube", str(exc))
    try:
        spec = parse_dir(folder)
    except CubeError as exc:
        raise CodedError("invalid_mlcube", str(exc))
    unknown = [task for task in tasks if task not in spec.tasks]
    if unknown:
        raise CodedError("invalid", f"{spec.name} has no task {unknown[0]!r}; its tasks: {', '.join(spec.tasks)}.")
    return folder, spec


def _project(ctx: JobContext, source: Version, workdir: Path) -> dict[str, Any]:
    """Check a project's MLCube, build its image offline and run the tasks asked for, in order."""
    tasks = ctx.job.params.get("tasks") or []
    folder, spec = stage_project(source, workdir / "project",
                                 lambda file, target: fetch(source, file.path, target.parent), tasks)
    engine = container_engine(ctx, ctx.job.params.get("build", "auto"))
    result: dict[str, Any] = {"mlcube": spec.summary(), "built": False}
    if engine is None:
        return result
    image = image_name(source)
    built = _build_image(ctx, engine, folder / spec.build_context, spec.build_file, image, workdir, [])
    result.update({**built.record(), "engine": engine, "built": True, "runs": []})
    try:
        for task in tasks:
            ran = run_task(engine, image, spec, task, folder / "workspace", network="none",
                           timeout=settings.HUB_CUBE_RUN_TIMEOUT_S, on_line=ctx.log,
                           memory_mb=settings.HUB_CUBE_MEMORY_MB)
            result["runs"].append({"task": task, "seconds": round(ran.seconds, 3), "exit": ran.code})
    except EngineError as exc:
        if exc.log:
            ctx.log(exc.log[-4000:], "error")
        raise CodedError(exc.code, str(exc))
    return result


@register
class ContainerJob(JobKind):
    """Make a model version's MLCube (build and check its image where possible), or build a project's and
    run its tasks. On Slurm only a project's run goes to a node (with the node's container engine); a
    model's cube, checked against the gateway, stays with the hub's workers."""

    name = "container"
    label = "container build"
    queue = "convert"

    def run(self, ctx: JobContext) -> dict[str, Any]:
        os.environ.setdefault("CONTAINERS_CONF", settings.HUB_CONTAINERS_CONF)
        source = source_of(ctx)
        workdir = Path(tempfile.mkdtemp(prefix="hpcfair-cube-"))
        try:
            if source.artifact.kind == Artifact.Kind.PROJECT:
                return _project(ctx, source, workdir)
            return _model(ctx, source, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def stage(self, job, folder: Path) -> Plan | None:
        source = source_of(JobContext(job))
        tasks = job.params.get("tasks") or []
        if source.artifact.kind != Artifact.Kind.PROJECT or job.params.get("build") == "no" or not tasks:
            return None
        project = folder / "project"
        cube, spec = stage_project(source, project, lambda file, target: place(file.blob_id, target), tasks)
        if cube != project:  # the runner builds folder/project: the unzipped cube takes its place
            shutil.rmtree(project)
            cube.rename(project)
        image = image_name(source)
        return Plan({"compute": "cube", "image": image, "tasks": tasks, "engine": settings.HUB_CUBE_ENGINE,
                     "wheels": str(settings.HUB_CUBE_WHEELS), "build_timeout": settings.HUB_CUBE_BUILD_TIMEOUT_S,
                     "run_timeout": settings.HUB_CUBE_RUN_TIMEOUT_S, "containers_conf": settings.HUB_CONTAINERS_CONF,
                     "mlcube": spec.summary()},
                    summary=f"MLCube {spec.name}: build {image}, run {', '.join(tasks)}")

    def publish(self, job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        import json

        spec = json.loads((folder / "job.json").read_text())
        return {"mlcube": spec["mlcube"], **{k: v for k, v in node_result(folder).items() if k != "task"}}
