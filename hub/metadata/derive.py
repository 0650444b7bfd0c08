"""What the hub derives from a version's files instead of asking for it: formats and frameworks (from
names), ONNX opset, signature and parameter count (the protobuf, parsed without running anything),
sizes, a CSV's record structure, HDF5/NetCDF/Zarr structure (read in the sandbox, ``hub.metadata.scientific``),
a GGUF model's header (read in the sandbox too, ``hub.metadata.gguf``),
and the model card (README.md with YAML front matter).

Nothing here unpickles or imports a model: ONNX is plain protobuf and CSV is text.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from hpcfair.convert import families
from hpcfair.convert.formats import (
    ZIP_TAIL,
    looks_like_model,
    maybe_booster,
    torch_zip_format,
    zip_format_from_tail,
    zip_names_from_tail,
)
from hpcfair.cube.spec import CUBE_FILE, CubeError, CubeSpec, parse_files, parse_zip

from hub.bounded import Unreadable, load_json, load_yaml
from hub.errors import HubError
from hub.metadata import gguf, scientific
from ontology.fields import FRAMEWORKS, Invalid, MetadataError, class_labels

log = logging.getLogger(__name__)

DATA_FORMATS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".npy": "npy", ".npz": "npz", ".json": "json",
                ".jsonl": "jsonl", ".h5": "hdf5", ".hdf5": "hdf5", ".nc": "netcdf", ".tfrecord": "tfrecord",
                ".txt": "text", ".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".zip": "zip", ".tar": "tar",
                ".gz": "gzip", ".zarr": "zarr", ".arrow": "arrow"}
CARD_NAMES = {"readme.md", "modelcard.md", "model_card.md", "datacard.md"}
CARD_MAX_BYTES = 1024 * 1024
CSV_SAMPLE_ROWS = 200
CONFIG_MAX = 4 * 1024 * 1024  # a Hugging Face config.json read for its id2label


class FileInfo:
    """The part of a staged file that derivation reads. A file with no local copy (a direct upload's bytes
    are in the object store) is fetched by ``fetch(local)`` when derivation first reads it, and only then:
    most large files (weights, archives) are never read here."""

    def __init__(self, path: str, local: Path, size: int, fetch: Callable[[Path], None] | None = None,
                 read_range: Callable[[int, int], bytes] | None = None) -> None:
        self.path, self._local, self.size, self._fetch, self._read_range = path, local, size, fetch, read_range

    def read(self, start: int, length: int) -> bytes:
        """``length`` bytes from ``start``, without fetching the rest of a file that is not local."""
        if self._read_range is not None and not self._local.exists():
            return self._read_range(start, length)
        with self.local.open("rb") as handle:
            handle.seek(start)
            return handle.read(length)

    def head(self, length: int) -> bytes:
        """The file's first ``length`` bytes."""
        return self.read(0, length)

    def tail(self, length: int) -> bytes:
        """The file's last ``length`` bytes (a zip's central directory)."""
        start = max(0, self.size - length)
        return self.read(start, self.size - start)

    @property
    def local(self) -> Path:
        if self._fetch is not None and not self._local.exists():
            self._fetch(self._local)
        return self._local

    @property
    def suffix(self) -> str:
        return Path(self.path.lower()).suffix


def read_card(files: Sequence[FileInfo]) -> tuple[dict[str, Any], str]:
    """A model/data card's YAML front matter and its Markdown body (({}, "") without a card)."""
    card = next((f for f in files if f.path.lower() in CARD_NAMES), None)
    if card is None or card.size > CARD_MAX_BYTES:
        return {}, ""
    return split_card(card.local.read_bytes().decode("utf-8", errors="replace"), card.path)


def split_card(text: str, name: str = "README.md") -> tuple[dict[str, Any], str]:
    """A card's text as its YAML front matter and its Markdown body; a ``MetadataError`` (under ``name``)
    when the front matter cannot be read or is not a mapping."""
    if not text.startswith("---"):
        return {}, text
    head, sep, body = text[3:].partition("\n---")
    if not sep:
        return {}, text
    try:
        front = load_yaml(head) or {}
    except Unreadable as exc:
        raise MetadataError({name: [f"The YAML front matter cannot be read: {exc} (lines counted after "
                                    "the first ---)."]})
    if not isinstance(front, dict):
        raise MetadataError({name: ["The YAML front matter must be a mapping of field: value."]})
    return front, body.lstrip("-").lstrip("\n")


def _sniffed(info: FileInfo) -> str | None:
    """The family a .json/.txt file's first bytes say (a booster's save_model file; bytes only, nothing loaded)."""
    found = families.by_head(info.head(families.HEAD))
    return found.name if found else None


def described(name: str) -> dict[str, str]:
    """The ``format`` and ``framework`` a version of family ``name`` gets (a framework the ontology does not
    name is ``other``)."""
    framework = families.FAMILIES[name].framework
    return {"format": name, "framework": framework if framework in FRAMEWORKS else "other"}


def _archive(info: FileInfo) -> str | None:
    """What a zip that its name does not tell holds (a Hugging Face folder, a SavedModel), from its central
    directory's member names; None for other files and archives (a tar is told by the worker)."""
    if not info.path.lower().endswith(".zip") or looks_like_model(info.path):
        return None
    return zip_format_from_tail(info.tail(ZIP_TAIL))


TORCH_SUFFIXES = (".pt", ".pth")


def _family(info: FileInfo, sniffed: dict[str, str], archived: dict[str, str]) -> str:
    """The family of a version's primary model file: what its bytes or its zip's member names say, else its
    suffix's (``families.by_suffix``), else a SavedModel (an archive so named). A .pt/.pth is what its zip's
    member names say (its central directory, read from the file's tail; nothing is unpickled): torchscript,
    torch-export, else ``pytorch`` (a plain torch.save checkpoint, or a file whose names do not tell)."""
    if info.suffix in TORCH_SUFFIXES:
        return torch_zip_format(zip_names_from_tail(info.tail(ZIP_TAIL)) or []) or "pytorch"
    if found := sniffed.get(info.path) or archived.get(info.path):
        return found
    return next((f.name for f in families.by_suffix(info.suffix)), "savedmodel")


def derive(kind: str, files: Sequence[FileInfo]) -> dict[str, Any]:
    """Facts about ``files`` for a ``kind`` version; only keys the hub could establish."""
    out: dict[str, Any] = {}
    if kind == "model":
        sniffed = {f.path: found for f in files if maybe_booster(f.path) and (found := _sniffed(f))}
        archived = {f.path: found for f in files if (found := _archive(f))}
        models = [f for f in files if looks_like_model(f.path) or f.path in sniffed or f.path in archived]
        primary = next((f for f in models if f.suffix == ".onnx"), models[0] if models else None)
        if primary is not None:
            out.update(described(_family(primary, sniffed, archived)))
            if primary.suffix == ".onnx":
                out.update(onnx_facts(primary))
        elif files:
            out["format"] = _data_format(files[0])
        out.update(safetensors_facts(files, primary is None))
        out.update(id2label_facts(files))
        out.update(gguf.facts(files))  # GGUF, told by its magic bytes: read in the sandbox
    elif kind == "project":
        out["mlcube"] = project_cube(files).summary()
    elif kind == "dataset" and files:
        data = [f for f in files if f.path.lower() not in CARD_NAMES] or list(files)
        formats = [_data_format(f) for f in data]
        out["format"] = max(set(formats), key=formats.count)
        out["size"] = sum(f.size for f in files)
        table = next((f for f in data if f.suffix in (".csv", ".tsv")), None)
        if table is not None:
            out.update(csv_facts(table))
        out.update(scientific.facts(data))  # HDF5, NetCDF, Zarr: read in the sandbox
    return out


def project_cube(files: Sequence[FileInfo]) -> CubeSpec:
    """A project's MLCube: ``mlcube.yaml`` at the top, or one zip holding it; 400 ``invalid_mlcube``
    naming every problem (``tasks.train.entrypoint``: ...) when MLCube could not run it."""
    try:
        if any(f.path == CUBE_FILE for f in files):
            return parse_files({f.path: f.local for f in files})
        archives = [f for f in files if f.suffix == ".zip"]
        if len(archives) == 1:
            return parse_zip(archives[0].local)
    except CubeError as exc:
        raise HubError("invalid_mlcube", f"The project's MLCube cannot run: {exc}", errors=exc.problems)
    raise HubError("invalid_mlcube", f"A project version needs an {CUBE_FILE} at its top level (or one zip holding "
                                     "it): the MLCube that says how to build and run the project.",
                   errors={CUBE_FILE: ["Missing."]})


def _data_format(info: FileInfo) -> str:
    return DATA_FORMATS.get(info.suffix) or (info.suffix.lstrip(".") or "binary")


def onnx_facts(info: FileInfo) -> dict[str, Any]:
    """Opset, signature and parameter count read from the ONNX protobuf (no external data, no execution)."""
    if info.size > settings.HUB_METADATA_ONNX_MAX_BYTES:
        return {}
    try:
        import numpy as np
        import onnx
        from onnx import helper

        model = onnx.load(str(info.local), load_external_data=False)
    except Exception:  # not ONNX after all: the verify job reports what is wrong with it
        log.info("could not read %s as ONNX", info.path, exc_info=True)
        return {}
    initializers = {i.name for i in model.graph.initializer}

    def specs(values) -> list[dict[str, Any]]:
        out = []
        for value in values:
            if value.name in initializers:
                continue
            tensor = value.type.tensor_type
            try:
                dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)).name
            except Exception:
                dtype = "float32"
            dtype = "string" if dtype == "object" else dtype
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim] \
                if tensor.HasField("shape") else None
            out.append({"name": value.name, "shape": shape, "dtype": dtype})
        return out

    facts: dict[str, Any] = {"parameters": int(sum(int(np.prod(i.dims)) for i in model.graph.initializer))
                                           + learned_attribute_values(model.graph)}
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    if "ai.onnx" in opsets:
        facts["opset"] = int(opsets["ai.onnx"])
    inputs, outputs = specs(model.graph.input), specs(model.graph.output)
    if inputs:
        facts["inputs"] = inputs
    if outputs:
        facts["outputs"] = outputs
    return facts


# ONNX-ML operators keep what was learned in attributes, not initializers: a random forest's thresholds and
# leaf weights, a linear model's coefficients, an SVM's support vectors.
LEARNED_ATTRIBUTES = {"nodes_values", "class_weights", "target_weights", "coefficients", "intercepts",
                      "support_vectors", "rho", "nodes_values_as_tensor", "class_weights_as_tensor",
                      "target_weights_as_tensor", "leaf_weights", "nodes_splits"}


def learned_attribute_values(graph) -> int:
    """How many learned values ONNX-ML nodes of ``graph`` hold in their attributes."""
    total = 0
    for node in graph.node:
        if node.domain != "ai.onnx.ml":
            continue
        for attribute in node.attribute:
            if attribute.name in LEARNED_ATTRIBUTES:
                dims = list(attribute.t.dims) if attribute.HasField("t") else []
                count = 1
                for d in dims:
                    count *= d
                total += len(attribute.floats) + len(attribute.ints) + (count if dims else 0)
    return total


def safetensors_facts(files: Sequence[FileInfo], weights_only: bool) -> dict[str, Any]:
    """Parameter count and dtypes of a model's safetensors weights, from their headers (JSON; nothing is
    loaded); a Hugging Face folder's shards count together. ``weights_only``: no other model file says
    what the version's format is, so the weights do (huggingface beside a config.json, else safetensors)."""
    from hpcfair.convert.tensors import NotSafetensors, facts

    shards = [f for f in files if f.suffix == ".safetensors"]
    if not shards:
        return {}
    total: dict[str, Any] = {"tensors": 0, "dtypes": {}}
    try:
        for shard in shards:
            one = facts(shard.local)
            total["tensors"] += one["tensors"]
            for dtype, count in one["dtypes"].items():
                total["dtypes"][dtype] = total["dtypes"].get(dtype, 0) + count
    except (NotSafetensors, OSError):
        log.info("could not read the safetensors header of %s", [s.path for s in shards], exc_info=True)
        return {}
    out: dict[str, Any] = {"weights": total}
    if weights_only:
        out["parameters"] = sum(total["dtypes"].values())
        hugging_face = any(f.path.rsplit("/", 1)[-1] == "config.json" for f in files)
        out.update(described("huggingface" if hugging_face else "safetensors"))
    return out


def id2label_facts(files: Sequence[FileInfo]) -> dict[str, Any]:
    """A Hugging Face folder's class names (``id2label`` in its ``config.json``) as ``labels``; the
    placeholders that transformers writes when nobody named the classes (LABEL_0, LABEL_1) are not names."""
    config = next((f for f in files if f.path.rsplit("/", 1)[-1] == "config.json" and f.size <= CONFIG_MAX), None)
    if config is None:
        return {}
    try:
        found = load_json(config.head(config.size), what=config.path).get("id2label")
        names = class_labels(found) if isinstance(found, dict) and found else []
    except (HubError, AttributeError, OSError, Invalid):  # a config nobody can read names no classes
        return {}
    if not names or all(name == f"LABEL_{index}" for index, name in enumerate(names)):
        return {}
    return {"labels": names}


def csv_facts(info: FileInfo) -> dict[str, Any]:
    """Column names and types from the header and the first rows; the row count when the file is small."""
    try:
        with info.local.open("r", encoding="utf-8", newline="") as handle:
            head = handle.read(256 * 1024)
        dialect = csv.excel_tab if info.suffix == ".tsv" else csv.excel
        rows = list(csv.reader(io.StringIO(head), dialect))
    except (UnicodeDecodeError, csv.Error, OSError):
        return {}
    if not rows or not all(cell.strip() for cell in rows[0]):
        return {}
    header, body = rows[0], [r for r in rows[1:CSV_SAMPLE_ROWS + 1] if len(r) == len(rows[0])]
    if len(set(header)) != len(header):
        return {}
    facts: dict[str, Any] = {"records": [{"name": name, "dtype": _column_type([r[i] for r in body])}
                                         for i, name in enumerate(header)]}
    if info.size <= 64 * 1024 * 1024:
        with info.local.open("rb") as handle:
            facts["record_count"] = max(sum(1 for _ in handle) - 1, 0)
    return facts


def _column_type(values: list[str]) -> str:
    values = [v.strip() for v in values if v.strip()]
    if not values:
        return "string"
    for dtype, parse in (("int64", int), ("float64", float)):
        try:
            for value in values:
                parse(value)
            return dtype
        except ValueError:
            continue
    if all(v.lower() in ("true", "false") for v in values):
        return "bool"
    return "string"

