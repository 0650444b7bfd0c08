"""``modelAPI``: the papers' calls, each driven by a task config (a YAML file or a dict).

```python
from hpcfair import modelAPI
api = modelAPI()                      # endpoint and token: arguments, HPCFAIR_* or ~/.hpcfair
api.conversion("conversion.yaml")     # local checkpoints -> verified ONNX files (export_file)
api.collaborate("collaboration.yaml") # a chain of models on the hub's gateway -> export_file
api.container("container.yaml")
```

Wherever a config names a model file, a PID (``ark:/…``) or ``owner/name[@version]`` works too. Local
model files that must run on the hub are first published as private models of yours (named after
``model_name``); identical files are sent once and reused.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcfair import arrays as tensors
from hpcfair.client import HubClient
from hpcfair.config import Config, load
from hpcfair.errors import ConfigError, ConflictError, HubError, JobError, NotFoundError
from hpcfair.progress import stage_printer

REF_RE = re.compile(r"^(ark:/?\S+|[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w.+-]+)?)$")
NAME_RE = re.compile(r"[^A-Za-z0-9._-]+")
RUN_COPY_LICENSE = "LicenseRef-not-stated"
ORT_DTYPES = {"tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
              "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
              "tensor(bool)": "bool"}


@dataclass
class ModelSource:
    """One model a config names: a local file or a hub reference, and the config key that named it."""

    name: str
    key: str
    local: Path | None = None
    ref: str | None = None


@dataclass
class Dataset:
    """A dataset version on this machine: its record, its files (by path), its arrays and Croissant."""

    info: dict[str, Any]
    files: dict[str, Path]
    client: HubClient = field(repr=False)

    @property
    def pid(self) -> str:
        return self.info["pid"]

    @property
    def metadata(self) -> dict[str, Any]:
        return self.info.get("metadata") or {}

    def arrays(self) -> dict[str, Any]:
        """The numeric files (.npy, .npz, .json, .csv, .tsv, .txt) as arrays, keyed by file (and member)."""
        found: dict[str, Any] = {}
        for path, local in self.files.items():
            if local.suffix.lower() not in tensors.FORMATS:
                continue
            data = tensors.read_inputs(local, key=path)
            if isinstance(data, dict):
                found.update({f"{path}:{name}" if len(self.files) > 1 else name: value for name, value in data.items()})
            else:
                found[path] = data
        return found

    def croissant(self) -> dict[str, Any]:
        """The version's Croissant JSON-LD (load it with ``mlcroissant`` for record-level access)."""
        return self.client.export(self.info, "croissant").json()


class modelAPI:  # noqa: N801 - the papers' name
    """Every hub task from a config: ``conversion``, ``inference``, ``collaborate``, ``container``,
    ``optimize``, ``search``, ``upload``, ``download``, ``load_model``, ``load_dataset``, ``run``."""

    def __init__(self, endpoint: str | None = None, token: str | None = None, *, client: HubClient | None = None,
                 cache: str | Path | None = None) -> None:
        self.client = client or HubClient(endpoint, token, cache=cache)

    # --- dispatch ---------------------------------------------------------------------------------

    def run(self, cfg: str | Path | dict[str, Any]) -> Any:
        """Do what ``general_args.task`` says."""
        config = load(cfg)
        task = config.args.general_args.task
        if task == "inference" and config.args.general_args.tag == "collaboration":
            return self.collaborate(config)
        return getattr(self, TASK_METHODS[task])(config)

    # --- conversion -------------------------------------------------------------------------------

    def conversion(self, cfg: str | Path | dict[str, Any]) -> list[dict[str, Any]]:
        """Convert each model to a verified ONNX file at ``out_args.export_file`` (one report per model).

        Local files convert on this machine (needs ``pip install 'hpcfair[convert]'``); hub models, and
        local files with ``general_args.upload: true``, convert on the hub."""
        config = load(cfg)
        sources = self._sources(config)
        exports = self._exports(config, sources, ".onnx")
        backends = self._backends(config, sources)
        reports = []
        for index, (source, export, backend) in enumerate(zip(sources, exports, backends, strict=True)):
            if source.local and not config.args.general_args.upload:
                reports.append(self._convert_here(config, source, export, backend, index))
            else:
                reports.append(self._convert_on_hub(config, source, export))
        return reports

    def _convert_here(self, config: Config, source: ModelSource, export: Path, backend: str | None,
                      index: int = 0) -> dict[str, Any]:
        from hpcfair.convert import ConversionError, convert_file, detect, report_notes
        from hpcfair.convert.formats import check_backend

        options = config.conversion_options(index, source.name)
        try:
            fmt = detect(source.local)
            check_backend(fmt, backend, source.local.name)
            report = convert_file(source.local, export, **options, on_line=stage_printer(source.name))
        except ConversionError as exc:
            hint = (" Install the frameworks with: pip install 'hpcfair[convert]'."
                    if "No module named" in exc.detail else "")
            raise HubError(f"{source.key} ({source.local.name}): {exc.detail}{hint}", code=exc.code)
        check = report["verification"]
        return {"model": source.name, "source": str(source.local), "format": fmt, "export_file": str(export),
                "where": "local", "opset": report["opset"].get("ai.onnx"), "verified": check["passed"],
                "max_abs_diff": check["max_abs_diff"], "verification": check, "notes": report_notes(report)}

    def _convert_on_hub(self, config: Config, source: ModelSource, export: Path) -> dict[str, Any]:
        task = config.task
        info = self._hub_version(config, source, private=task.visibility != "public", metadata=task.metadata)
        onnx = self._onnx_version(info, task.onnx_version)
        self._export(self._onnx_item(onnx), export)
        meta = onnx.get("metadata") or {}
        checks = list((meta.get("verification") or {}).values())
        return {"model": source.name, "source": source.ref or str(source.local), "export_file": str(export),
                "where": "hub", "pid": onnx["pid"], "source_pid": info["pid"], "opset": meta.get("opset"),
                "verified": meta.get("verified"),
                "max_abs_diff": max((c.get("max_abs_diff") or 0 for c in checks), default=None)}

    # --- inference and collaboration -----------------------------------------------------------------

    def inference(self, cfg: str | Path | dict[str, Any]) -> dict[str, Any]:
        """Run the model(s) on ``task_args.input`` (a chain when there are several); the outputs go to
        ``out_args.export_file`` and are returned."""
        return self._run_models(load(cfg))

    def collaborate(self, cfg: str | Path | dict[str, Any]) -> dict[str, Any]:
        """Run a chain of models (outputs of one into the inputs of the next, by position or
        ``task_args.links``); with ``task_args.merge: true`` merge them into one ONNX model on the hub."""
        config = load(cfg)
        if len(self._sources(config)) < 2:
            raise config.error(config.where("model_file"), "a collaboration chains two or more models")
        return self._run_models(config)

    def _run_models(self, config: Config) -> dict[str, Any]:
        task, device = config.task, config.args.device_args
        sources = self._sources(config)
        exports = config.names("export_file")
        if len(exports) > 1:
            raise config.error("out_args.export_file", "name one file for the outputs")
        export = config.path(exports[0]) if exports else None
        if task.merge:
            return self._merge(config, sources, export)
        dataset = task.dataset or (task.input[len("dataset:"):].strip() if (task.input or "").startswith("dataset:")
                                   else None)
        common = {"device": device.device, "threads": device.worker_num or None, "if_no_worker": device.if_no_worker}
        if dataset:  # a batch run over a hub dataset: always a job
            outputs = self._on_hub(self._runnable(config, sources), None, task.links, dataset=dataset, **common)
        else:
            raw, cast = self._read_input(config)
            if device.device == "local":
                outputs = self._run_here(config, sources, raw, cast)
            else:
                runnable = self._runnable(config, sources)
                feeds = tensors.fit(raw, (runnable[0].get("metadata") or {}).get("inputs"), cast=cast)
                outputs = self._on_hub(runnable, feeds, task.links, mode=device.mode, outputs=task.outputs, **common)
        if export is not None:
            tensors.write_outputs(export, outputs)
        return outputs

    @staticmethod
    def _read_input(config: Config) -> tuple[Any, bool]:
        """``task_args.input`` read, and whether its arrays need casting to the model's dtypes (text, JSON)."""
        if not config.task.input:
            raise config.error(config.where("input"), "missing: the input file (.npy, .npz, .json, .txt, .csv)")
        path = config.path(config.task.input)
        if not path.is_file():
            raise config.error(config.where("input"), f"no file {path}")
        return tensors.read_inputs(path, key=config.where("input")), path.suffix.lower() not in (".npy", ".npz")

    def _on_hub(self, runnable: list[dict[str, Any]], feeds: dict[str, Any] | None,
                links: list[dict[str, str]] | None, **options: Any) -> dict[str, Any]:
        """Run one version, or a chain of them, on the gateway; a run answered with a job is waited for."""
        refs = [_name(info) for info in runnable]
        if len(refs) == 1:
            outputs, job = self.client.infer(refs[0], feeds or {}, **options)
        else:
            outputs, job = self.client.collaborate(refs, feeds, links=links, **options)
        return outputs or self._job_outputs(self.client.wait(job))

    def _merge(self, config: Config, sources: list[ModelSource], export: Path | None) -> dict[str, Any]:
        task = config.task
        refs = [_name(info) for info in self._runnable(config, sources)]
        name = NAME_RE.sub("-", "-".join(s.name for s in sources))[:90] + "-merged"
        _, job = self.client.collaborate(refs, None, merge=True, links=task.links, name=name,
                                         visibility=task.visibility or "private")
        done = self.client.wait(job)
        merged = self.client.resolve(done["result"]["pid"])
        if export is not None:
            self._export(self._onnx_item(merged), export)
        return {"pid": merged["pid"], "version": f"{merged['artifact']}@{merged['version']}",
                "verified": (merged.get("metadata") or {}).get("verified"),
                "export_file": str(export) if export else None}

    def _job_outputs(self, job: dict[str, Any]) -> dict[str, Any]:
        result = job.get("result") or {}
        published = self.client.resolve(result["pid"])
        item = next(f for f in published["files"] if f["path"] == "outputs.npz")
        return tensors.read_outputs(self._named_copy(item))

    def _run_here(self, config: Config, sources: list[ModelSource], raw: Any, cast: bool) -> dict[str, Any]:
        sessions = [self.load_model(str(s.local) if s.local else s.ref, threads=config.args.device_args.worker_num,
                                    _key=s.key) for s in sources]
        spec = [{"name": i.name, "dtype": ORT_DTYPES.get(i.type), "shape": i.shape} for i in sessions[0].get_inputs()]
        return run_chain(sessions, tensors.fit(raw, spec, cast=cast), config.task.links)

    # --- containers, optimisation ----------------------------------------------------------------------

    def container(self, cfg: str | Path | dict[str, Any]) -> dict[str, Any]:
        """Build an MLCube's image offline and run it with podman/docker (the papers' Listing 4).

        A project: ``task_args.work_dir`` is a folder with an ``mlcube.yaml`` (or a hub project,
        owner/name[@version], fetched into a folder of that name); its ``tasks`` (default: all) run in
        order with the folder mounted at ``volume``, and their output goes to ``export_file``.
        A model: ``model_args`` names it (file, PID or owner/name); its cube comes from the hub (made
        there when missing) into ``work_dir``, and ``infer`` runs on ``task_args.input`` into
        ``export_file``. ``device: gpu`` runs the GPU cube and needs an NVIDIA GPU here."""
        from hpcfair.cube import local
        from hpcfair.cube.spec import CubeError, parse_dir

        config = load(cfg)
        task, device = config.task, config.args.device_args.device
        if device == "local":
            raise config.error("device_args.device", "a container runs on this machine's cpu or gpu: use cpu or gpu")
        gpu = device == "gpu"
        if gpu and not local.has_gpu():
            raise HubError("container: device_args.device is 'gpu' but this machine has no NVIDIA GPU (nvidia-smi "
                           "finds none); set device: cpu to run the CPU image.", code="no_gpu")
        engine = local.engine_or_fail()
        model = bool(config.names("model_file") or config.names("model_name"))
        signature = None
        if model:
            folder, signature = self._model_cube(config)
        else:
            folder = self._project_folder(config)
        cube_file = "mlcube-gpu.yaml" if model and gpu else "mlcube.yaml"
        try:
            spec = parse_dir(folder, cube_file)
        except CubeError as exc:
            raise HubError(f"container ({folder}): {exc}", code="invalid_mlcube")
        image = task.build_tag or spec.image
        build_file = config.path(task.build_file) if task.build_file else None
        if build_file is not None and not build_file.is_file():
            raise config.error(config.where("build_file"), f"no file {build_file}")
        wheels = local.wheel_cache(self.client.cache.root)
        requirements = "requirements-gpu.txt" if model and gpu else "requirements.txt"
        built = local.build_here(engine, folder, spec, image, wheels, build_file=build_file, requirements=requirements)
        report = local.LocalRun(image, engine, built)
        export = config.names("export_file")
        export_path = config.path(export[0]) if export else None
        if model:
            outputs = self._cube_infer(config, engine, spec, image, folder, signature, gpu, report)
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

    def _project_folder(self, config: Config) -> Path:
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
        info = self.client.resolve(work_dir)
        folder = config.path(info["artifact"].split("/")[-1])
        self.client.download(info["pid"], folder)
        return folder

    def _model_cube(self, config: Config) -> tuple[Path, list[dict[str, Any]] | None]:
        """A model's cube from the hub (made there when missing), unpacked into ``work_dir`` (default
        ``<model_name>-mlcube``), and the model's input signature."""
        from hpcfair.cube.generate import unzip_cube

        sources = self._sources(config)
        if len(sources) != 1:
            raise config.error(config.where("model_file"), "a container runs one model")
        source = sources[0]
        onnx = self._onnx_version(self._hub_version(config, source), None)
        cube = self.client.container(onnx["pid"])
        if cube is None:
            done = self.client.wait(self.client.build_container(onnx["pid"], build="no"))
            cube = self.client.resolve(done["result"]["pid"])
        item = next((f for f in cube["files"] if f["path"].endswith(".mlcube.zip")), None)
        if item is None:
            raise HubError(f"{cube['artifact']}@{cube['version']} holds no .mlcube.zip", code="invalid_mlcube")
        archive = self._named_copy(item)
        work_dir = config.task.work_dir
        folder = config.path(work_dir) if work_dir else config.path(f"{source.name}-mlcube")
        with tempfile.TemporaryDirectory(prefix="hpcfair-cube-") as tmp:
            unpacked = unzip_cube(archive, Path(tmp))
            if folder.exists():
                shutil.rmtree(folder)
            shutil.copytree(unpacked, folder)
        return folder, (onnx.get("metadata") or {}).get("inputs")

    def _cube_infer(self, config: Config, engine: str, spec: Any, image: str, folder: Path,
                    signature: list[dict[str, Any]] | None, gpu: bool, report: Any) -> dict[str, Any]:
        """``infer`` of a model's cube on ``task_args.input``: the outputs, by name."""
        import numpy as np

        from hpcfair.cube import local

        raw, cast = self._read_input(config)
        feeds = tensors.fit(raw, signature, cast=cast)
        np.savez(folder / "workspace" / "inputs.npz", **feeds)
        report.runs = local.run_tasks(engine, image, spec, ["infer"], folder / "workspace", gpu=gpu,
                                      overrides={"inputs": "inputs.npz", "outputs": "outputs.npz"})
        return tensors.read_outputs(folder / "workspace" / "outputs.npz")

    def optimize(self, cfg: str | Path | dict[str, Any]) -> list[dict[str, Any]]:
        """Graph-optimise (and int8-quantise) each ONNX model; files go beside ``export_file`` (or the config)."""
        config = load(cfg)
        sources = self._sources(config)
        exports = self._exports(config, sources, ".optimized.onnx")
        reports = []
        for source, export in zip(sources, exports, strict=True):
            if source.local and not config.args.general_args.upload:
                reports.append(self._optimize_here(config, source, export.parent))
                continue
            info = self._onnx_version(self._hub_version(config, source, private=True), None)
            done = self.client.wait(self.client.optimize(info["pid"], quantize=config.task.quantize))
            derived = self.client.resolve(done["result"]["pid"])
            files = self.client.download(derived["pid"], export.parent)
            report = (derived.get("metadata") or {}).get("optimization")
            reports.append({"model": source.name, "where": "hub", "pid": derived["pid"],
                            "files": [str(p) for p in files], "report": report})
        return reports

    def _optimize_here(self, config: Config, source: ModelSource, folder: Path) -> dict[str, Any]:
        from hpcfair.convert import ConversionError, sandbox

        if source.local.suffix.lower() != ".onnx":
            raise config.error(source.key, "optimize works on ONNX files; convert the model first (task: conversion)")
        workdir = Path(tempfile.mkdtemp(prefix="hpcfair-optimize-"))
        try:
            shutil.copyfile(source.local, workdir / source.local.name)
            try:
                report = sandbox.run({"task": "optimize", "source": source.local.name, "output_dir": "out",
                                      "quantize": config.task.quantize}, workdir)
            except ConversionError as exc:
                raise HubError(f"{source.key}: {exc.detail}", code=exc.code)
            folder.mkdir(parents=True, exist_ok=True)
            files = []
            for name in report.get("variants", {}):
                files.append(str(shutil.move(sandbox.output_file(workdir, f"out/{name}"), folder / name)))
            report.pop("ok", None)
            return {"model": source.name, "where": "local", "files": files, "report": report}
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    # --- finding, publishing, fetching -------------------------------------------------------------

    def search(self, query: str | Path | dict[str, Any] = "", /, **filters: Any) -> list[dict[str, Any]]:
        """Artifacts matching words and facet filters (``framework="onnx"``, ``kind="model"``, …); a config
        with ``task: search`` works too (``task_args.query``, ``task_args.filters``)."""
        if isinstance(query, dict) or (isinstance(query, Path | str) and str(query).endswith((".yaml", ".yml"))):
            config = load(query)
            query, filters = config.task.query or "", {**(config.task.filters or {}), **filters}
        return self.client.search(str(query), **filters)

    def upload(self, cfg: str | Path | dict[str, Any] | None = None, *, name: str | None = None,
               files: list[str | Path] | None = None, metadata: dict[str, Any] | str | Path | None = None,
               kind: str = "model", visibility: str = "public", version: str = "") -> dict[str, Any]:
        """Publish a version (of your artifact ``name``, created if needed) from files and metadata; returns
        the version with its PID. Metadata is a dict or a file: YAML, JSON, or a model card README.md."""
        base = Path.cwd()
        if cfg is not None:
            config = load(cfg)
            task, base = config.task, config.base
            name = name or (config.names("model_name") or [None])[0]
            files = files or task.files or config.names("model_file")
            metadata = metadata if metadata is not None else task.metadata
            kind, visibility, version = task.kind, task.visibility or visibility, task.version or version
        if not name or not files:
            raise ConfigError("an upload needs a name (model_name) and files (task_args.files or model_file)",
                              key="task_args.files")
        paths = [Path(f) if Path(f).is_absolute() else base / f for f in files]
        for path in paths:
            if not path.is_file():
                raise ConfigError(f"no file {path}", key="task_args.files")
        meta, card = _metadata(metadata, base)
        named = {p.name: p for p in paths} | ({"README.md": card} if card else {})
        return self.client.publish(name, named, meta, kind=kind, visibility=visibility, version=version)

    def download(self, ref: str, dest: str | Path = ".", files: list[str] | None = None) -> list[Path]:
        """A version's files (or some of them) under ``dest``, through the local cache."""
        return self.client.download(ref, dest, files)

    def download_config(self, cfg: str | Path | dict[str, Any]) -> list[Path]:
        """``task: download``: the models named in ``model_file`` into ``out_args.export_dir``."""
        config = load(cfg)
        refs = config.names("model_file") or config.names("model_name")
        if not refs:
            raise config.error("model_args.model_file", "missing: the PID or owner/name[@version] to download")
        folder = config.path(config.args.out_args.export_dir or ".")
        return [path for ref in refs for path in self.download(ref, folder, config.task.files)]

    def load_model(self, ref: str, *, original: bool = False, threads: int = 0, trust_pickle: bool = False,
                   _key: str = "model") -> Any:
        """An ONNX Runtime session for a hub model (its ONNX conversion) or a local ``.onnx`` file; with
        ``original=True`` the uploaded model in its own framework (pickles only with ``trust_pickle``:
        loading one runs the code inside it)."""
        local = Path(ref).expanduser()
        if local.is_file():
            if local.suffix.lower() != ".onnx":
                raise HubError(f"{_key}: {local.name} is not ONNX; convert it first (task: conversion)",
                               code="not_runnable")
            path = local
        else:
            info = self.client.resolve(ref)
            if original:
                return self._load_original(info, trust_pickle)
            path = self.client.cached(self._onnx_item(self._onnx_version(info, None)))
        try:
            import onnxruntime as ort
        except ImportError:
            raise HubError("running models here needs ONNX Runtime: pip install 'hpcfair[onnx]'", code="missing_extra")
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def _load_original(self, info: dict[str, Any], trust_pickle: bool) -> Any:
        from hpcfair.convert.formats import PICKLE_SUFFIXES, SNIFFED_SUFFIXES, SUFFIX, detect, looks_like_model

        item = next((f for f in info["files"] if looks_like_model(f["path"])), None)
        if item is None:
            raise NotFoundError(f"{info['artifact']}@{info['version']} has no model file.", code="not_found")
        path = self._named_copy(item)
        fmt = detect(path)
        if path.suffix.lower() in SNIFFED_SUFFIXES:  # e.g. decoder.ckpt: frameworks go by the suffix
            named = path.with_name(path.stem + SUFFIX.get(fmt, path.suffix))
            if not named.exists():
                shutil.copyfile(path, named)
            path = named
        if fmt == "torchscript":
            import torch

            return torch.jit.load(str(path), map_location="cpu")
        if fmt == "torch_export":
            import torch

            return torch.export.load(str(path))
        if fmt in ("keras", "keras_h5"):
            import keras

            return keras.models.load_model(str(path), compile=False)
        if fmt == "onnx":
            return self.load_model(str(path))
        if fmt == "skops":
            import skops.io

            return skops.io.load(str(path), trusted=skops.io.get_untrusted_types(file=str(path)) if trust_pickle
                                 else None)
        if path.suffix.lower() in PICKLE_SUFFIXES and trust_pickle:
            import joblib

            return joblib.load(path)  # noqa: S301 - the caller said they trust it
        raise HubError(f"{item['path']} is a {fmt} file that runs code when loaded; pass trust_pickle=True if you "
                       "trust its author, or use the ONNX conversion (original=False).", code="untrusted_format")

    def load_dataset(self, ref: str) -> Dataset:
        """A dataset version's files on this machine (cached), with ``arrays()`` and ``croissant()``."""
        info = self.client.resolve(ref)
        return Dataset(info=info, files={f["path"]: self._named_copy(f) for f in info["files"]}, client=self.client)

    # --- helpers ------------------------------------------------------------------------------------

    def _export(self, item: dict[str, Any], dest: Path) -> Path:
        """A hub file (an entry of a version's ``files``) copied to ``dest`` through the cache."""
        self.client.cached(item)
        return self.client.cache.copy_out(item["sha256"], dest)

    def _named_copy(self, item: dict[str, Any]) -> Path:
        """A cached file under its own name (readers go by suffix): ``<cache>/named/<sha256>/<path>``."""
        target = self.client.cache.root / "named" / item["sha256"] / item["path"]
        if not target.is_file():
            self.client.cached(item)
            self.client.cache.copy_out(item["sha256"], target)
        return target

    def _sources(self, config: Config) -> list[ModelSource]:
        names, files = config.names("model_name"), config.names("model_file")
        if files and names and len(files) != len(names):
            raise config.error(config.where("model_file"), f"has {len(files)} entries but model_name has {len(names)}")
        entries = files or names
        if not entries:
            raise config.error("model_args.model_file", "missing: the model file(s), PID(s) or owner/name of the "
                                                        "model(s)")
        key = config.where("model_file" if files else "model_name")
        sources = []
        for index, value in enumerate(entries):
            where = f"{key}[{index}]" if len(entries) > 1 else key
            name = names[index] if names else Path(value.split("@")[0]).stem
            path = config.path(value)
            if path.exists():
                sources.append(ModelSource(name, where, local=path))
            elif REF_RE.match(value):
                sources.append(ModelSource(name, where, ref=value))
            else:
                raise config.error(where, f"no file {path}, and not a PID (ark:/…) or owner/name[@version]")
        return sources

    @staticmethod
    def _exports(config: Config, sources: list[ModelSource], suffix: str) -> list[Path]:
        exports = config.names("export_file")
        if exports and len(exports) != len(sources):
            raise config.error("out_args.export_file", f"has {len(exports)} entries for {len(sources)} models")
        return [config.path(e) for e in exports] or [config.path(f"{s.name}{suffix}") for s in sources]

    @staticmethod
    def _backends(config: Config, sources: list[ModelSource]) -> list[str | None]:
        backend = config.args.general_args.backend
        if isinstance(backend, list):
            if len(backend) != len(sources):
                raise config.error("general_args.backend", f"has {len(backend)} entries for {len(sources)} models")
            return list(backend)
        return [backend] * len(sources)

    def _hub_version(self, config: Config, source: ModelSource, *, private: bool = True,
                     metadata: dict[str, Any] | str | None = None) -> dict[str, Any]:
        """The hub version of a source: resolved, or the local file published as a model of yours."""
        if source.ref:
            try:
                return self.client.resolve(source.ref)
            except NotFoundError:
                raise config.error(source.key, f"no file {config.path(source.ref)}, and the hub has no model "
                                               f"{source.ref} that you can see")
            except HubError as exc:
                if exc.code != "unreachable":
                    raise
                raise config.error(source.key, f"no file {config.path(source.ref)}; as a hub reference it could not "
                                               f"be looked up: {exc.message}")
        name = NAME_RE.sub("-", source.name).strip("-.") or "model"
        me = self.client.me()
        meta, card = (_metadata(metadata, config.base) if metadata
                      else (_run_copy_metadata(source, me.get("name") or me.get("username") or ""), None))
        files = {source.local.name: source.local} | ({"README.md": card} if card else {})
        try:
            return self.client.publish(name, files, meta, visibility="private" if private else "public",
                                       reuse_duplicate=True, owner=me.get("username"))
        except ConflictError as exc:
            if exc.code != "visibility_mismatch":
                raise
            public = exc.body["artifact"]
            raise config.error(source.key, f"model_name {name!r} is your public model {public}: name the hub "
                                           f"version instead ({public}@VERSION) or choose another model_name")

    def _runnable(self, config: Config, sources: list[ModelSource]) -> list[dict[str, Any]]:
        """The ONNX versions that run for the sources (converted on the hub when needed)."""
        return [self._onnx_version(self._hub_version(config, source), None) for source in sources]

    def _onnx_version(self, info: dict[str, Any], opset: int | None) -> dict[str, Any]:
        """The version itself when it is ONNX, else its conversion (waiting for the hub's conversion job,
        or asking for one)."""
        meta = info.get("metadata") or {}
        if any(f["path"].lower().endswith(".onnx") for f in info["files"]) and opset in (None, meta.get("opset")):
            return info
        for link in info.get("derivatives") or []:
            if link["relation"] == "converted_from":
                candidate = self.client.resolve(link["version_pid"])
                if opset in (None, (candidate.get("metadata") or {}).get("opset")):
                    return candidate
        jobs = [job for job in self.client.jobs(kind="convert")  # newest first
                if (job.get("version") or {}).get("pid") == info["pid"]
                and opset in (None, (job.get("params") or {}).get("opset"))]
        if jobs and jobs[0]["state"] == "failed":  # the same file would fail the same way: say why instead
            failed = jobs[0]
            raise JobError(f"{_name(info)} has no ONNX version: the hub's conversion failed "
                           f"({failed.get('error_code')}): {failed.get('error_detail')} Publish a version that fixes "
                           f"this, or ask for a new conversion (modelAPI().client.convert({info['pid']!r})).",
                           code=failed.get("error_code") or "conversion_failed", body=failed)
        running = [job for job in jobs if job["state"] not in ("failed", "cancelled")]
        job = running[0] if running else None
        if job is None:
            try:
                job = self.client.convert(info["pid"], opset=opset)
            except ConflictError as exc:
                raise HubError(f"{info['artifact']}@{info['version']} cannot be converted: {exc}", code=exc.code)
        done = self.client.wait(job)
        return self.client.resolve(done["result"]["pid"])

    @staticmethod
    def _onnx_item(info: dict[str, Any]) -> dict[str, Any]:
        found = [f for f in info["files"] if f["path"].lower().endswith(".onnx")]
        if len(found) != 1:
            raise HubError(f"{info['artifact']}@{info['version']} has {len(found)} ONNX files; name the model file.",
                           code="ambiguous_model")
        return found[0]


TASK_METHODS = {"conversion": "conversion", "inference": "inference", "collaboration": "collaborate",
                "container": "container", "optimize": "optimize", "search": "search", "upload": "upload",
                "download": "download_config"}


def _name(info: dict[str, Any]) -> str:
    """``owner/name@version`` of a version record: the gateway's URL without another lookup."""
    return f"{info['artifact']}@{info['version']}"


def run_chain(sessions: list[Any], feeds: dict[str, Any], links: list[dict[str, str]] | None = None
              ) -> dict[str, Any]:
    """Run ONNX Runtime sessions one after another: each joint maps by ``links[i]`` ({next input: output})
    or by position."""
    current = feeds
    for index, session in enumerate(sessions):
        names = [output.name for output in session.get_outputs()]
        values = dict(zip(names, session.run(None, current), strict=True))
        if index + 1 == len(sessions):
            return values
        link = links[index] if links and index < len(links) else None
        following = [item.name for item in sessions[index + 1].get_inputs()]
        current = ({name: values[output] for name, output in link.items()} if link
                   else {name: values[names[k]] for k, name in enumerate(following)})
    return current


def _run_copy_metadata(source: ModelSource, creator: str) -> dict[str, Any]:
    """Metadata of a private copy published only to run a local file on the hub."""
    return {"title": source.name, "description": f"{source.local.name}, published by the hpcfair client to run on "
                                                 "the hub.", "creators": [{"name": creator or "unknown"}],
            "license": RUN_COPY_LICENSE, "task": "unspecified"}


def _metadata(value: dict[str, Any] | str | Path | None, base: Path) -> tuple[dict[str, Any], Path | None]:
    """(metadata, model card file): a dict as is; a YAML/JSON file read; a README.md sent as the card."""
    import json

    import yaml

    if value is None or isinstance(value, dict):
        return dict(value or {}), None
    path = Path(value) if Path(value).is_absolute() else base / value
    if not path.is_file():
        raise ConfigError(f"no metadata file {path}", key="task_args.metadata")
    if path.suffix.lower() == ".md":
        return {}, path
    try:
        data = json.loads(path.read_text()) if path.suffix.lower() == ".json" else yaml.safe_load(path.read_text())
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path.name} does not parse: {exc}", key="task_args.metadata")
    if not isinstance(data, dict):
        raise ConfigError(f"{path.name} must hold a mapping of field: value", key="task_args.metadata")
    return data, None
