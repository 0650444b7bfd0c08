"""ONNX models whose weights live beside the graph (ONNX external data), as every part of the hub handles them.

A protobuf message, so an ONNX file, cannot pass 2 GiB; larger models keep their tensors in data files next
to ``model.onnx`` (``model.onnx.data`` by default, any name the exporter chose), each tensor naming its file
(``location``, relative to the ONNX file's folder), ``offset`` and ``length``. In the hub such a file is a file
of the same version, content-addressed like every other. A ``location`` is untrusted: one that is absolute,
climbs out (``..``) or names no file of the version is refused (``model_load_failed``), so a crafted graph
cannot make a worker read ``/etc/shadow`` as weights.

``externalise`` moves the weights of an exported model into one data file tensor by tensor (streaming: the
weights are never held twice), when they pass ``threshold()`` bytes (``HPCFAIR_EXTERNAL_DATA_MB``; the hub
passes ``HUB_ONNX_EXTERNAL_DATA_MB``). Nothing here imports Django or an HTTP client.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpcfair.compute.errors import CodedError

DEFAULT_THRESHOLD = 1024 * 2**20  # weights above 1 GiB go beside the graph: well below protobuf's 2 GiB
ALIGN = 64 * 1024  # each tensor starts on a 64 KiB boundary: ONNX Runtime can memory-map it


def threshold() -> int:
    """Bytes of weights above which a converted model keeps them in a data file (``HPCFAIR_EXTERNAL_DATA_MB``)."""
    try:
        return int(float(os.environ["HPCFAIR_EXTERNAL_DATA_MB"]) * 2**20)
    except (KeyError, ValueError):
        return DEFAULT_THRESHOLD


def tensors(model) -> Iterator[Any]:
    """Every tensor of ``model`` that can hold weights: initializers and constant attributes, in subgraphs too."""
    from onnx.external_data_helper import _get_all_tensors

    return _get_all_tensors(model)


def _location(tensor) -> str | None:
    from onnx import TensorProto

    if tensor.data_location != TensorProto.EXTERNAL:
        return None
    return next((entry.value for entry in tensor.external_data if entry.key == "location"), "")


def locations(model) -> list[str]:
    """The data files ``model``'s tensors name (as written in the graph), sorted; empty for a self-contained
    model."""
    return sorted({found for tensor in tensors(model) if (found := _location(tensor)) is not None})


def safe_location(location: str) -> str | None:
    """``location`` normalised to a path inside the ONNX file's folder, or None when it is absolute, climbs
    out, is empty or uses a backslash or a drive (read as Windows paths by some runtimes)."""
    if not location or "\\" in location or ":" in location or "\x00" in location or location.startswith("/"):
        return None
    normal = posixpath.normpath(location)
    if normal in (".", "") or normal.startswith("../") or normal == ".." or normal.startswith("/"):
        return None
    return normal


def refused(location: str, why: str) -> CodedError:
    return CodedError("model_load_failed", f"The model's weights name the data file {location[:120]!r}, which "
                                           f"{why}; only files of the model's own version, beside its .onnx file, "
                                           "are read.")


def check_locations(model, folder: Path) -> list[str]:
    """The data files ``model`` reads from ``folder`` (its ONNX file's folder); ``model_load_failed`` when one
    leaves the folder, is a link or is missing."""
    found = []
    for location in locations(model):
        normal = safe_location(location)
        if normal is None:
            raise refused(location, "lies outside the model's folder")
        path = folder
        for part in normal.split("/"):
            path = path / part
            if path.is_symlink():
                raise refused(location, "is a link")
        if not path.is_file():
            raise refused(location, "is not a file of the version")
        found.append(normal)
    return found


def data_files(model, names: dict[str, Any], onnx_path: str) -> dict[str, Any]:
    """The version's files (``names``: path in the version -> anything) that ``model`` (the version's file
    ``onnx_path``) reads its weights from, keyed by their ``location``; ``model_load_failed`` when a location
    leaves the ONNX file's folder or names no file of the version."""
    folder = posixpath.dirname(onnx_path)
    chosen = {}
    for location in locations(model):
        normal = safe_location(location)
        if normal is None:
            raise refused(location, "lies outside the model's folder")
        member = posixpath.join(folder, normal) if folder else normal
        if member not in names:
            raise refused(location, "is not a file of the version")
        chosen[normal] = names[member]
    return chosen


def weight_bytes(model) -> int:
    """Bytes of the tensors stored in ``model`` itself (raw or typed fields), approximately for typed ones."""
    total = 0
    for tensor in tensors(model):
        if tensor.HasField("raw_data"):
            total += len(tensor.raw_data)
        else:
            total += 4 * (len(tensor.float_data) + len(tensor.int32_data)) + 8 * (
                len(tensor.int64_data) + len(tensor.double_data) + len(tensor.uint64_data))
    return total


def externalise(path: Path, data_name: str | None = None, limit: int | None = None) -> list[str]:
    """Rewrite the ONNX file ``path`` so that its weights live in one data file beside it (``data_name``,
    default ``<file name>.data``) when they pass ``limit`` bytes (default ``threshold()``), one tensor at a
    time: weights in other data files (an exporter's one file per tensor) are copied over and those files
    removed. Returns the data files the model then reads (none for a small model left whole)."""
    import onnx
    from onnx import TensorProto

    path = Path(path)
    folder = path.parent
    model = onnx.load(str(path), load_external_data=False)
    before = check_locations(model, folder)
    limit = threshold() if limit is None else limit
    if weight_bytes(model) + sum((folder / name).stat().st_size for name in before) <= limit:
        if before:  # small enough to be one file: take the weights in
            onnx.save_model(onnx.load(str(path)), str(path))
            for name in before:
                (folder / name).unlink()
        return []
    data_name = data_name or f"{path.name}.data"
    target = folder / f".{data_name}.partial"
    with open(target, "wb") as out:
        for tensor in tensors(model):
            location = _location(tensor)
            if location is None:
                if not tensor.HasField("raw_data") or len(tensor.raw_data) < 1024:
                    continue  # typed fields and small tensors stay in the graph
                payload = tensor.raw_data
            else:
                info = {entry.key: entry.value for entry in tensor.external_data}
                with open(folder / safe_location(location), "rb") as source:
                    source.seek(int(info.get("offset") or 0))
                    payload = source.read(int(info["length"])) if info.get("length") else source.read()
            offset = -out.tell() % ALIGN + out.tell()
            out.seek(offset)
            out.write(payload)
            del tensor.external_data[:]
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            for key, value in (("location", data_name), ("offset", str(offset)), ("length", str(len(payload)))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            del payload
    onnx.save_model(model, str(path))
    for name in before:
        if name != data_name:
            (folder / name).unlink()
    os.replace(target, folder / data_name)
    return [data_name]


def load_graph(path: Path):
    """``path``'s graph without its external weights (cheap for any size), its data files checked inside its
    folder."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    check_locations(model, Path(path).parent)
    return model


def uses_external_data(model) -> bool:
    return bool(locations(model))
