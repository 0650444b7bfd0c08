"""``modelAPI``'s containers: an MLCube (a project folder, a hub project, or a hub model's cube, made there when
missing) built offline with podman or docker and run on this machine (the papers' Listing 4)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hpcfair import _registry, _sources
from hpcfair import arrays as tensors
from hpcfair._sources import REF_RE
from hpcfair.client import HubClient
from hpcfair.config import Config
from hpcfair.errors import HubError


def container(client: HubClient, config: Config) -> dict[str, Any]:
    """``modelAPI.container``: a project's or a model's MLCube built offline and run here."""
    from hpcfair.cube import local
    from hpcfair.cube.spec import CubeError, parse_dir

    task, device = config.task, config.args.device_args.device
    if device == "local":
        raise config.error("device_args.device", "a container runs on this machine's cpu or gpu: use cpu or gpu")
    gpu = device == "gpu"
    if gpu and not local.has_gpu():
        raise HubError("container: device_args.device is 'gpu' but this machine has no NVIDIA GPU (nvidia-smi "
                       "finds none); set device: cpu to run the CPU image.", code="no_gpu")
    engine = local.engine_or_fail(cache_root=client.cache.root)
    model = bool(config.names("model_file") or config.names("model_name"))
    signature = None
    if model:
        folder, signature = model_cube(client, config)
    else:
        folder = project_folder(client, config)
    cube_file = "mlcube-gpu.yaml" if model and gpu else "mlcube.yaml"
    try:
        spec = parse_dir(folder, cube_file)
    except CubeError as exc:
        raise HubError(f"container ({folder}): {exc}", code="invalid_mlcube")
    image = task.build_tag or spec.image
    build_file = config.path(task.build_file) if task.build_file else None
    if build_file is not None and not build_file.is_file():
        raise config.error(config.where("build_file"), f"no file {build_file}")
    wheels = local.wheel_cache(client.cache.root)
    requirements = "requirements-gpu.txt" if model and gpu else "requirements.txt"
    built = local.build_here(engine, folder, spec, image, wheels, build_file=build_file, requirements=requirements)
    report = local.LocalRun(image, engine, built)
    export = config.names("export_file")
    export_path = config.path(export[0]) if export else None
    if model:
        outputs = cube_infer(config, engine, spec, image, folder, signature, gpu, report)
        if export_path is not None:
            tensors.write_outputs(export_path, outputs)
        return {**report.report(), "cube": str(folder), "outputs": outputs,
                "export_file": str(export_path) if export_path else None}
    tasks = config.names("tasks") or list(spec.tasks)
    unknown = [name for name in tasks if name not in spec.tasks]
    if unknown:
        raise config.error(config.where("tasks"), f"{spec.name} has no task {unknown[0]!r}; its tasks: "
                                                  f"{', '.join(spec.tasks)}")
    volume = task.volume
    if volume is not None and not volume.startswith("/"):
        raise config.error(config.where("volume"), f"{volume!r} is not an absolute path in the container")
    report.runs = local.run_tasks(engine, image, spec, tasks, folder / "workspace", gpu=gpu,
                                  mounts={folder.resolve(): volume} if volume else None)
    if export_path is not None:
        export_path.write_text(report.output)
    return {**report.report(), "project": str(folder), "output": report.output,
            "export_file": str(export_path) if export_path else None}


def project_folder(client: HubClient, config: Config) -> Path:
    """The project's folder: ``work_dir``, or a hub project's files fetched into a folder of its name."""
    work_dir = config.task.work_dir
    if not work_dir:
        raise config.error("task_args.work_dir", "missing: the project folder with its mlcube.yaml, or a hub "
                                                 "project (owner/name), or model_args naming a model")
    folder = config.path(work_dir)
    if folder.is_dir():
        return folder
    if not REF_RE.match(work_dir):
        raise config.error(config.where("work_dir"), f"no folder {folder}, and not a hub project "
                                                     "(owner/name[@version])")
    info = client.resolve(work_dir)
    folder = config.path(info["artifact"].split("/")[-1])
    client.download(info["pid"], folder)
    return folder


def model_cube(client: HubClient, config: Config) -> tuple[Path, list[dict[str, Any]] | None]:
    """A model's cube from the hub (made there when missing), unpacked into ``work_dir`` (default
    ``<model_name>-mlcube``), and the model's input signature."""
    from hpcfair.cube.generate import unzip_cube

    sources = _sources.sources(config)
    if len(sources) != 1:
        raise config.error(config.where("model_file"), "a container runs one model")
    source = sources[0]
    onnx = _registry.onnx_version(client, _registry.hub_version(client, config, source), None)
    cube = client.container(onnx["pid"])
    if cube is None:
        done = client.wait(client.build_container(onnx["pid"], build="no"))
        cube = client.resolve(done["result"]["pid"])
    item = next((f for f in cube["files"] if f["path"].endswith(".mlcube.zip")), None)
    if item is None:
        raise HubError(f"{cube['artifact']}@{cube['version']} holds no .mlcube.zip", code="invalid_mlcube")
    archive = _registry.named_copy(client, item)
    work_dir = config.task.work_dir
    folder = config.path(work_dir) if work_dir else config.path(f"{source.name}-mlcube")
    with tempfile.TemporaryDirectory(prefix="hpcfair-cube-") as tmp:
        unpacked = unzip_cube(archive, Path(tmp))
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(unpacked, folder)
    return folder, (onnx.get("metadata") or {}).get("inputs")


def cube_infer(config: Config, engine: str, spec: Any, image: str, folder: Path,
               signature: list[dict[str, Any]] | None, gpu: bool, report: Any) -> dict[str, Any]:
    """``infer`` of a model's cube on ``task_args.input``: the outputs, by name."""
    import numpy as np

    from hpcfair.cube import local

    raw, cast = _sources.read_input(config)
    feeds = tensors.fit(raw, signature, cast=cast)
    np.savez(folder / "workspace" / "inputs.npz", **feeds)
    report.runs = local.run_tasks(engine, image, spec, ["infer"], folder / "workspace", gpu=gpu,
                                  overrides={"inputs": "inputs.npz", "outputs": "outputs.npz"})
    return tensors.read_outputs(folder / "workspace" / "outputs.npz")
