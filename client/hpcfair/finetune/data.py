"""Datasets for fine-tuning: the hub's CSV/TSV, NPZ and Parquet files, datasets described by Croissant, and
the variables of an HDF5 or NetCDF file or a Zarr store (the columns are the variables' paths: ``target:
/labels``, ``features: [/temperature]``, as an NPZ's arrays are).

``schema`` reads only what names the columns (a CSV's header, an NPZ's array headers, a Parquet footer, the
Croissant record set; a scientific file's structure, which the hub already holds in the version's metadata:
``scientific_schema``), so the hub checks a config against it before any job starts; ``load`` (and
``load_variables``, slab by slab) reads the data in the sandbox; ``split`` is the seeded train/validation
split every family uses."""

from __future__ import annotations

import csv
import io
import json
import math
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

import numpy as np
from numpy.lib import format as npy_format

from hpcfair import archives, scidata
from hpcfair.finetune.errors import FinetuneError

TABLES = (".csv", ".tsv", ".parquet", ".npz")
HEAD_BYTES = 256 * 1024
MAX_INFLATED = 4 * 1024**3
Opener = Callable[[str], BinaryIO]  # path in the dataset -> a seekable binary stream


@dataclass(frozen=True)
class Source:
    """Where a dataset's columns come from: a table file, and for Croissant the field -> column names."""

    path: str
    fields: dict[str, str] | None = None  # Croissant: field name -> column in ``path``
    variables: tuple[dict[str, Any], ...] | None = None  # a scientific file's: path, dtype, shape, coordinate


def _suffix(path: str) -> str:
    return PurePosixPath(path.lower()).suffix


def is_croissant(path: str) -> bool:
    name = PurePosixPath(path.lower()).name
    return "croissant" in name and name.endswith((".json", ".jsonld"))


def is_scientific(path: str) -> bool:
    """Whether ``path`` names an HDF5 or NetCDF file or a Zarr store, read by variable."""
    return _suffix(path) in scidata.SUFFIXES


def choose(paths: Sequence[str], data_file: str | None = None) -> str:
    """The file a fine-tune reads: ``data_file`` when named, a Croissant description, or the only table (an
    HDF5/NetCDF file or a Zarr store counts as one)."""
    units = scidata.units_of(paths)
    if data_file:
        if data_file not in paths and data_file not in units:
            shown = sorted({*(p for p in paths if not scidata.zarr_root(p)), *units})
            raise FinetuneError("unknown_file", f"The dataset has no file {data_file!r}; it has "
                                                f"{', '.join(shown[:20])}.")
        return data_file
    described = [p for p in paths if is_croissant(p)]
    if described:
        return described[0]
    tables = sorted({*(p for p in paths if _suffix(p) in TABLES), *units})
    if not tables:
        raise FinetuneError("unsupported_dataset", "The dataset has no CSV, TSV, NPZ or Parquet file, HDF5 or "
                                                   "NetCDF file or Zarr store (nor a Croissant description) to "
                                                   "train on.")
    if len(tables) > 1:
        raise FinetuneError("ambiguous_dataset", f"The dataset has several tables ({', '.join(tables[:10])}); "
                                                 "name one in task_args.data_file.")
    return tables[0]


def schema(path: str, opener: Opener, paths: Sequence[str]) -> tuple[Source, dict[str, str]]:
    """(where the data is, column name -> dtype) of the dataset file ``path``, reading headers only."""
    if is_croissant(path):
        with opener(path) as handle:
            return _croissant(handle.read(8 * 1024 * 1024), paths)
    with opener(path) as handle:
        return Source(path), _columns(path, handle)


def scientific_schema(path: str, structure: dict[str, Any]) -> tuple[Source, dict[str, str]]:
    """(where the data is, variable path -> dtype and shape) of an HDF5/NetCDF file or Zarr store from its
    structure (``hpcfair.scidata.describe``'s, which the hub keeps as the version's ``scientific`` entry)."""
    variables = tuple(v for v in structure.get("variables") or [] if v.get("shape"))
    if not variables:
        raise FinetuneError("unreadable_dataset", f"{path} has no variable with a rows axis to train on.")
    return Source(path, variables=variables), {v["path"]: f"{v['dtype']}{list(v['shape'])}" for v in variables}


def read_structure(path: Path, bounds: dict[str, Any] | None = None) -> dict[str, Any]:
    """The structure of a scientific file or store on this machine (in the sandbox), after the checks that
    refuse a file with bytes outside it, a compression bomb or a billion chunks (their codes)."""
    try:
        return scidata.describe(path, scidata.Bounds(**bounds or {}))
    except scidata.ScienceRefused as exc:
        raise FinetuneError(exc.code, exc.detail) from None


def variables_for(source: Source, target: str, features: Sequence[str] | None) -> list[str]:
    """The variables a fine-tune reads from a scientific file, target first (features by default: every
    non-coordinate variable but the target), once ``check`` found them: numeric, and one row per sample
    along the same first axis."""
    found = {v["path"]: v for v in source.variables or ()}
    names = [target, *(features or [p for p, v in found.items() if p != target and not v.get("coordinate")])]
    if len(names) < 2:
        raise FinetuneError("unknown_column", f"{source.path} has no variable besides {target} to learn from; "
                                              "name them in task_args.features.")
    for name in names:
        if not _numeric(found[name]["dtype"]):
            raise FinetuneError("non_numeric_feature", f"{source.path}:{name} holds {found[name]['dtype']}, not "
                                                       "numbers; fine-tuning reads numeric variables (class "
                                                       "labels as integers).")
    rows = {name: found[name]["shape"][0] for name in names}
    other = next((n for n in names if rows[n] != rows[target]), None)
    if other is not None:
        raise FinetuneError("shape_mismatch", f"{source.path}: the target {target} has {rows[target]} rows (its "
                                              f"first axis) but {other} has {rows[other]}; every variable of a "
                                              "fine-tune needs one row per sample.")
    return names


def _numeric(dtype: str) -> bool:
    try:
        return np.dtype(dtype).kind in "biuf"
    except TypeError:
        return False


def load_variables(path: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The ``names`` variables of the scientific file or store at ``path``, each read slab by slab (whole
    chunks) into one array, decoded as the CF conventions say (``hpcfair.scidata.read_variable``)."""
    try:
        return {name: scidata.read_variable(path, name) for name in names}
    except (KeyError, ValueError, OSError) as exc:
        raise FinetuneError("unreadable_dataset", f"{path.name}: the variables {', '.join(names)} could not be "
                                                  "read.", cause=exc)


def _columns(path: str, handle: BinaryIO) -> dict[str, str]:
    suffix = _suffix(path)
    try:
        if suffix in (".csv", ".tsv"):
            rows = _rows(handle.read(HEAD_BYTES), suffix, head=True)
            if not rows:
                raise FinetuneError("unreadable_dataset", f"{path} is empty.")
            body = [r for r in rows[1:201] if len(r) == len(rows[0])]
            return {name: _text_dtype([r[i] for r in body]) for i, name in enumerate(rows[0])}
        if suffix == ".npz":
            return _npz_columns(handle, path)
        if suffix == ".parquet":
            pq = _pyarrow(path)
            return {field.name: str(field.type) for field in pq.read_schema(handle)}
    except FinetuneError:
        raise
    except (ValueError, OSError, zipfile.BadZipFile, UnicodeDecodeError, csv.Error) as exc:
        raise FinetuneError("unreadable_dataset", f"{path} could not be read as {suffix[1:].upper()}.", cause=exc)
    raise FinetuneError("unsupported_dataset", f"{path}: fine-tuning reads CSV, TSV, NPZ, Parquet or a Croissant "
                                               "description.")


def _npz_columns(handle: BinaryIO, path: str) -> dict[str, str]:
    out = {}
    with zipfile.ZipFile(handle) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                version = npy_format.read_magic(member)
                reader = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
                shape, _, dtype = reader(member, max_header_size=10_000)
            out[info.filename[:-4]] = f"{dtype.name}{list(shape)}"
    if not out:
        raise FinetuneError("unreadable_dataset", f"{path} holds no arrays.")
    return out


def _pyarrow(path: str):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise FinetuneError("unsupported_dataset", f"{path} is Parquet, which needs pyarrow, not installed here; "
                                                   "upload the table as CSV or NPZ, or install pyarrow.")
    return pq


def _croissant(raw: bytes, paths: Sequence[str]) -> tuple[Source, dict[str, str]]:
    """The first record set of a Croissant description whose fields all come from one table of the dataset."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise FinetuneError("unreadable_dataset", "The Croissant description is not JSON.", cause=exc)
    files = {}
    for item in _list(doc.get("distribution") if isinstance(doc, dict) else None):
        if isinstance(item, dict):
            local = _local(item, paths)
            for key in ("@id", "name"):
                if local and isinstance(item.get(key), str):
                    files[item[key]] = local
    for record_set in _list(doc.get("recordSet") if isinstance(doc, dict) else None):
        fields, table = {}, None
        for item in _list(record_set.get("field") if isinstance(record_set, dict) else None):
            source = item.get("source") if isinstance(item, dict) else None
            if not isinstance(source, dict) or not isinstance(item.get("name"), str):
                continue
            file_ref = (source.get("fileObject") or source.get("fileSet") or {}).get("@id")
            column = (source.get("extract") or {}).get("column", item["name"])
            if file_ref in files and (table in (None, files[file_ref])):
                table = files[file_ref]
                fields[item["name"].rsplit("/", 1)[-1]] = column
        if table and fields:
            return Source(table, fields), {name: "croissant field" for name in fields}
    raise FinetuneError("unreadable_dataset", "The Croissant description has no record set whose fields come from "
                                              "a CSV, TSV, NPZ or Parquet file of this dataset.")


def _list(value: Any) -> list:
    return value if isinstance(value, list) else [value] if value is not None else []


def _local(item: dict[str, Any], paths: Sequence[str]) -> str | None:
    """The dataset's own file a Croissant FileObject names (by relative path, or a hub URL's file part)."""
    names = [item.get("contentUrl"), item.get("description"), item.get("name")]
    for name in [n for n in names if isinstance(n, str)]:
        if name in paths:
            return name
        url_path = unquote(urlparse(name).path)
        tail = url_path.split("/files/", 1)[1] if "/files/" in url_path else PurePosixPath(url_path).name
        if tail in paths and _suffix(tail) in TABLES:
            return tail
    return None


def _rows(raw: bytes, suffix: str, head: bool = False) -> list[list[str]]:
    text = raw.decode("utf-8-sig")
    if head and len(raw) >= HEAD_BYTES:
        text = text.rsplit("\n", 1)[0]  # the last line may be cut
    return [row for row in csv.reader(io.StringIO(text), csv.excel_tab if suffix == ".tsv" else csv.excel) if row]


def _text_dtype(values: list[str]) -> str:
    try:
        numbers = [float(v) for v in values if v.strip()]
    except ValueError:
        return "string"
    return "int64" if numbers and all(n.is_integer() for n in numbers) else "float64"


def check(columns: dict[str, str], target: str, features: Sequence[str] | None, text: str | None) -> None:
    """Every column the config names exists; the message lists the ones that do."""
    named = [("target", target)] + [("features", f) for f in features or []] + ([("text", text)] if text else [])
    for key, name in named:
        if name not in columns:
            shown = ", ".join(list(columns)[:30])
            raise FinetuneError("unknown_column", f"task_args.{key}: the dataset has no column {name!r}; its columns "
                                                  f"are {shown}.")


def load(source: Source, opener: Opener) -> dict[str, np.ndarray]:
    """The table's columns as arrays (first axis: rows), restricted to the Croissant fields when described."""
    path, suffix = source.path, _suffix(source.path)
    with opener(path) as handle:
        try:
            if suffix in (".csv", ".tsv"):
                rows = _rows(handle.read(), suffix)
                header, body = rows[0], rows[1:]
                if any(len(r) != len(header) for r in body):
                    raise FinetuneError("unreadable_dataset", f"{path}: some rows have another number of cells "
                                                              "than the header.")
                table = {name: _column([r[i] for r in body]) for i, name in enumerate(header)}
            elif suffix == ".npz":
                table = archives.read_npz(handle, MAX_INFLATED, path)
            else:
                table = {name: np.asarray(column.to_numpy(zero_copy_only=False))
                         for name, column in zip(*_parquet(_pyarrow(path), handle), strict=True)}
        except FinetuneError:
            raise
        except (ValueError, OSError, zipfile.BadZipFile, UnicodeDecodeError, csv.Error) as exc:
            raise FinetuneError("unreadable_dataset", f"{path} could not be read.", cause=exc)
    if source.fields:
        missing = [c for c in source.fields.values() if c not in table]
        if missing:
            raise FinetuneError("unknown_column", f"The Croissant description names column {missing[0]!r}, which "
                                                  f"{path} does not have.")
        table = {name: table[column] for name, column in source.fields.items()}
    rows = {len(a) for a in table.values()}
    if len(rows) != 1 or rows == {0}:
        raise FinetuneError("unreadable_dataset", f"{path}: the columns must have the same number of rows, at "
                                                  "least one.")
    return table


def _parquet(pq, handle: BinaryIO):
    table = pq.read_table(handle)
    return table.column_names, table.columns


def _column(values: list[str]) -> np.ndarray:
    try:
        numbers = np.array([float(v) for v in values])
    except ValueError:
        return np.array(values, dtype=str)
    return numbers.astype(np.int64) if np.all(np.mod(numbers, 1) == 0) and len(numbers) else numbers


def split(rows: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and validation row indices: a permutation by ``seed``, the first ``fraction`` held out."""
    if rows < 2:
        raise FinetuneError("dataset_too_small", "A fine-tune needs at least two rows (one to train, one to "
                                                 "validate).")
    order = np.random.default_rng(seed).permutation(rows)
    held = min(max(1, math.ceil(rows * fraction)), rows - 1)
    return np.sort(order[held:]), np.sort(order[:held])


def features(table: dict[str, np.ndarray], target: str, names: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    """The input matrix: the named columns (default: all but the target), float32, one row per sample. A
    single N-D array (an NPZ's images) keeps its shape."""
    names = list(names or [n for n in table if n != target])
    if not names:
        raise FinetuneError("unknown_column", "The dataset has no column besides the target to learn from.")
    arrays = [table[name] for name in names]
    for name, array in zip(names, arrays, strict=True):
        if not np.issubdtype(array.dtype, np.number) and array.dtype != bool:
            raise FinetuneError("non_numeric_feature", f"Column {name!r} is not numeric; name the numeric columns "
                                                       "in task_args.features (or text: for a text model).")
    if len(arrays) == 1 and arrays[0].ndim > 1:
        return arrays[0].astype(np.float32, copy=False), names
    return np.column_stack([a.reshape(len(a), -1) for a in arrays]).astype(np.float32), names
