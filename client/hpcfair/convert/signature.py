"""Tensor signatures (names, shapes, dtypes) and the sample inputs made from them or read from files.

A dimension is an int (fixed) or ``None``/a string (dynamic, e.g. ``"batch"``). Signatures come from
the uploader's metadata (``inputs: [{name, shape, dtype}]``), from the model itself where the format
records them, or from sample input files (``.npz`` keyed by input name, or ``.npy`` for one input).
"""

from __future__ import annotations

import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair import archives
from hpcfair.convert.errors import ConversionError

Dim = int | str | None
# Values for dynamic dimensions, first and second run: the second exercises the dynamic axes.
BATCH_SIZES = (1, 3)
OTHER_DYNAMIC = (8, 5)


@dataclass
class TensorSpec:
    """One input or output: name, shape (dynamic dims as None or a name), numpy dtype name."""

    name: str
    shape: list[Dim] = field(default_factory=list)
    dtype: str = "float32"
    low: float | None = None  # value range for generated inputs (token ids need it)
    high: float | None = None
    values: list | None = None  # the values generated inputs take (a text column's categories)

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @property
    def dynamic_axes(self) -> list[int]:
        return [axis for axis, dim in enumerate(self.shape) if not isinstance(dim, int)]


def specs_from_metadata(items: Any, what: str = "inputs") -> list[TensorSpec]:
    """Parse ``[{name, shape, dtype, low?, high?}]``; a bad entry is an error naming it."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise ConversionError("invalid_signature", f"{what} must be a list of {{name, shape, dtype}} objects.")
    specs = []
    for index, item in enumerate(items):
        where = f"{what}[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConversionError("invalid_signature", f"{where} needs a 'name' (a string).")
        shape = item.get("shape", [])
        if not isinstance(shape, list) or not all(d is None or isinstance(d, int | str) for d in shape):
            raise ConversionError(
                "invalid_signature", f"{where}.shape must be a list of ints, with null or a name for dynamic axes."
            )
        dtype = str(item.get("dtype", "float32"))
        try:
            np.dtype(dtype)
        except TypeError:
            raise ConversionError("invalid_signature", f"{where}.dtype {dtype!r} is not a numpy dtype name.")
        specs.append(TensorSpec(item["name"], list(shape), dtype, item.get("low"), item.get("high")))
    return specs


def specs_from_onnx(model) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """The graph's real inputs (initializers excluded) and outputs."""
    initializers = {init.name for init in model.graph.initializer}

    def spec(value) -> TensorSpec:
        tensor = value.type.tensor_type
        shape: list[Dim] = []
        for dim in tensor.shape.dim:
            if dim.HasField("dim_value"):
                shape.append(int(dim.dim_value))
            else:
                shape.append(dim.dim_param or None)
        from onnx import helper

        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type).name if tensor.elem_type else "float32"
        return TensorSpec(value.name, shape, dtype)

    inputs = [spec(v) for v in model.graph.input if v.name not in initializers]
    return inputs, [spec(v) for v in model.graph.output]


def generate_inputs(specs: list[TensorSpec], run: int = 0, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs matching ``specs``; ``run`` 1 uses other sizes for the dynamic axes."""
    rng = np.random.default_rng(seed + run)
    arrays = {}
    for spec in specs:
        if spec.shape is None:
            raise ConversionError("signature_required", f"The shape of input {spec.name!r} is unknown.")
        shape = []
        for axis, dim in enumerate(spec.shape):
            if isinstance(dim, int):
                shape.append(dim)
            else:
                shape.append(BATCH_SIZES[run] if axis == 0 else OTHER_DYNAMIC[run])
        dtype = np.dtype(spec.dtype)
        if spec.values:
            arrays[spec.name] = np.asarray(spec.values, dtype=object)[rng.integers(0, len(spec.values), size=shape)]
        elif dtype.kind in "iu":
            low = int(spec.low) if spec.low is not None else 0
            high = int(spec.high) if spec.high is not None else 2
            arrays[spec.name] = rng.integers(low, high, size=shape).astype(dtype)
        elif dtype.kind == "b":
            arrays[spec.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            low = spec.low if spec.low is not None else -1.0
            high = spec.high if spec.high is not None else 1.0
            arrays[spec.name] = rng.uniform(low, high, size=shape).astype(dtype)
    return arrays


def load_sample_inputs(path: Path, specs: list[TensorSpec] | None = None,
                       max_inflated: int = archives.DEFAULT_MAX_INFLATED, mapped: bool = False
                       ) -> dict[str, np.ndarray]:
    """Read ``.npz`` (keys are input names; refused before inflating past ``max_inflated``), ``.npy`` (the
    only input), a table (``.csv``/``.tsv``/``.parquet``: one input per column, a DataFrame model's) or the
    client's other input files (``.json``, ``.txt``); never unpickles. ``mapped``: a ``.npy`` is mapped
    read-only rather than read whole (a job's inputs, which its engine maps and reads batch by batch)."""
    try:
        if path.suffix.lower() in TABLES:
            arrays = read_table(path)
        elif path.suffix.lower() in (".json", ".txt"):
            from hpcfair import arrays as client_arrays
            from hpcfair.errors import ConfigError

            try:
                found = client_arrays.read_inputs(path, "sample_inputs")
            except ConfigError as exc:
                raise ConversionError("invalid_sample_inputs", f"{path.name} could not be read as input arrays.",
                                      cause=exc)
            arrays = found if isinstance(found, dict) else {"input": found}
        elif path.suffix == ".npz":
            arrays = archives.read_npz(path, max_inflated, path.name)
        else:
            array = np.load(path, mmap_mode="r" if mapped else None, allow_pickle=False)
            if specs and len(specs) != 1:
                raise ConversionError(
                    "invalid_sample_inputs",
                    f"{path.name} holds one array but the model has {len(specs)} inputs; use an .npz keyed by "
                    "input name.",
                )
            arrays = {specs[0].name if specs else "input": array}
    except archives.ArchiveTooLarge as exc:
        raise ConversionError("invalid_sample_inputs", str(exc))
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise ConversionError("invalid_sample_inputs", f"{path.name} is not a readable sample file: use .npy/.npz "
                                                       "of plain arrays (np.save/np.savez; object arrays are refused) "
                                                       "or a table (.csv, .parquet) with a header row.", cause=exc)
    if specs:
        missing = [spec.name for spec in specs if spec.name not in arrays]
        if missing and len(arrays) == len(specs):  # positional: the names differ but the count matches
            arrays = dict(zip([spec.name for spec in specs], arrays.values(), strict=True))
        elif missing:
            raise ConversionError(
                "invalid_sample_inputs",
                f"{path.name} has arrays {sorted(arrays)} but the model expects inputs {[s.name for s in specs]}.",
            )
    return arrays


TABLES = (".csv", ".tsv", ".parquet")


def read_table(path: Path) -> dict[str, np.ndarray]:
    """One array per column of a CSV/TSV (header row) or Parquet file; text columns as strings."""
    import pandas as pd

    if path.suffix.lower() == ".parquet":
        try:
            frame = pd.read_parquet(path)
        except ImportError as exc:
            raise ConversionError("invalid_sample_inputs", f"{path.name}: reading Parquet needs pyarrow, which this "
                                                           "converter lacks; give the sample as CSV.", cause=exc)
    else:
        frame = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",")
    if frame.empty:
        raise ConversionError("invalid_sample_inputs", f"{path.name} has no rows.")
    return {str(column): (frame[column].astype(str).to_numpy(dtype=object) if frame[column].dtype.kind in "OSUT"
                          or str(frame[column].dtype) in ("string", "str", "category") else frame[column].to_numpy())
            for column in frame.columns}


def align_to_inputs(arrays: dict[str, np.ndarray], inputs: list[TensorSpec], source: str) -> dict[str, np.ndarray]:
    """Sample arrays keyed as the exported model names its inputs, in the dtypes it takes.

    A single unnamed array (``.npy``, keyed ``input``) feeds a single-input model whatever that input is
    called (scikit-learn's ``X``); arrays whose names all differ feed the inputs by position when the count
    matches; float64 data feeds a float32 input (what ``np.save`` of a pandas column gives)."""
    names = [spec.name for spec in inputs]
    if not set(names) <= set(arrays):
        if len(arrays) != len(inputs):
            raise ConversionError(
                "invalid_sample_inputs",
                f"{source} has arrays {sorted(arrays)} but the model takes inputs {names}; save one array per input "
                "in an .npz keyed by input name (np.savez(path, **{name: array})).")
        arrays = dict(zip(names, arrays.values(), strict=True))
    aligned = {}
    for spec in inputs:
        array, wanted = np.asarray(arrays[spec.name]), np.dtype(spec.dtype)
        if array.ndim == 1 and len(spec.shape) == 2 and spec.shape[1] == 1:  # a table's column, a [n, 1] input
            array = array.reshape(-1, 1)
        if array.dtype != wanted:
            if wanted.kind == "O" and array.dtype.kind in "OUS":
                array = array.astype(object)
            elif wanted.kind == array.dtype.kind or (wanted.kind == "f" and array.dtype.kind in "iub"):
                array = array.astype(wanted)
            elif wanted.kind in "iu" and array.dtype.kind == "f" and np.array_equal(array, np.round(array)):
                array = array.astype(wanted)  # token ids written as floats
            else:
                raise ConversionError(
                    "invalid_sample_inputs",
                    f"{source}: input {spec.name!r} is {array.dtype.name}, the model takes {wanted.name}; save the "
                    f"array as {wanted.name} (array.astype('{wanted.name}')).")
        aligned[spec.name] = array
    return aligned


def specs_from_arrays(arrays: dict[str, np.ndarray]) -> list[TensorSpec]:
    return [TensorSpec(name, [None, *array.shape[1:]], array.dtype.name) for name, array in arrays.items()]
