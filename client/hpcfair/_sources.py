"""What a task config names: the models (local files or hub references, ``ModelSource``), their export
files and backends, and the input file; shared by the task families of ``modelAPI``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcfair import arrays as tensors
from hpcfair import scidata
from hpcfair.config import Config

REF_RE = re.compile(r"^(ark:/?\S+|[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w.+-]+)?)$")
NAME_RE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class ModelSource:
    """One model a config names: a local file or a hub reference, and the config key that named it."""

    name: str
    key: str
    local: Path | None = None
    ref: str | None = None


def read_input(config: Config, opened: bool = False) -> tuple[Any, bool]:
    """``task_args.input`` read, and whether its arrays need casting to the model's dtypes (text, JSON).
    ``opened``: a variable (``tas.nc:/tas``) as its ``scidata.VariableReader``, not read yet."""
    if not config.task.input:
        raise config.error(config.where("input"), "missing: the input file (.npy, .npz, .json, .txt, .csv)")
    reference = scidata.split_reference(config.task.input)
    if reference is not None:  # tas.nc:/tas, run.h5:/sim/energy, ocean.zarr:/ocean/u
        return read_variable(config, *reference, opened=opened), False
    path = config.path(config.task.input)
    if not path.is_file():
        raise config.error(config.where("input"), f"no file {path}")
    return tensors.read_inputs(path, key=config.where("input")), path.suffix.lower() not in (".npy", ".npz")


def read_variable(config: Config, name: str, variable: str, opened: bool = False) -> Any:
    """A variable of an HDF5, NetCDF or Zarr file of this machine (``task_args.input: tas.nc:/tas``), read slab
    by slab (``hpcfair.scidata``) into one array; ``opened``: its ``VariableReader`` instead, whose rows a
    local run reads a batch at a time."""
    path = config.path(name)
    if not path.exists():
        raise config.error(config.where("input"), f"no file {path}")
    try:
        return scidata.VariableReader(path, variable) if opened else scidata.read_variable(path, variable)
    except KeyError:
        raise config.error(config.where("input"), f"{path.name} has no variable {variable}") from None
    except ImportError as exc:
        raise config.error(config.where("input"), f"reading {path.name} needs {exc.name}: pip install h5py netCDF4 "
                                                  "zarr") from None
    except (OSError, ValueError) as exc:
        raise config.error(config.where("input"), f"cannot read {variable} of {path}: {exc}") from None


def sources(config: Config) -> list[ModelSource]:
    """The models a config names (``model_file``, else ``model_name``): local files or hub references."""
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


def exports(config: Config, sources: list[ModelSource], suffix: str) -> list[Path]:
    """Where each model's result goes: ``out_args.export_file``, else ``<model name><suffix>``."""
    exports = config.names("export_file")
    if exports and len(exports) != len(sources):
        raise config.error("out_args.export_file", f"has {len(exports)} entries for {len(sources)} models")
    return [config.path(e) for e in exports] or [config.path(f"{s.name}{suffix}") for s in sources]


def onnx_files(config: Config, sources: list[ModelSource]) -> list[str | None]:
    """Which ONNX file of each model's hub version runs (``onnx_file``: one per model; None: its only one)."""
    named = config.names("onnx_file")
    if named and len(named) != len(sources):
        raise config.error(config.where("onnx_file"), f"has {len(named)} entries for {len(sources)} models; "
                                                      "write '' for a model with one ONNX file")
    return [name or None for name in named] or [None] * len(sources)


def backends(config: Config, sources: list[ModelSource]) -> list[str | None]:
    """The framework each model is read with (``general_args.backend``: one for all, or one per model)."""
    backend = config.args.general_args.backend
    if isinstance(backend, list):
        if len(backend) != len(sources):
            raise config.error("general_args.backend", f"has {len(backend)} entries for {len(sources)} models")
        return list(backend)
    return [backend] * len(sources)


def version_ref(info: dict[str, Any]) -> str:
    """``owner/name@version`` of a version record: the gateway's URL without another lookup."""
    return f"{info['artifact']}@{info['version']}"
