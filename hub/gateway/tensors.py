"""Inputs in (JSON arrays, ``.npy``, ``.npz``), checked against a model's signature; outputs out in the
form the caller asks for. Nothing here unpickles: ``np.load`` runs with ``allow_pickle=False``."""

from __future__ import annotations

import io
import math
import re
import struct
import zipfile
from typing import Any

import numpy as np
import orjson
from django.conf import settings
from hpcfair import archives

from hub.errors import HubError

JSON = "application/json"
NPY = "application/x-npy"
NPZ = "application/x-npz"
FORMATS = {"json": JSON, "npy": NPY, "npz": NPZ}
NPY_TYPES = {NPY, "application/octet-stream"}
NPZ_TYPES = {NPZ, "application/zip"}


def _bad(detail: str, **extra: Any) -> HubError:
    return HubError("invalid_inputs", detail, **extra)


# The header numpy writes for a plain C-ordered numeric array; anything else goes through np.load.
_SIMPLE_NPY = re.compile(rb"\{'descr': '([<>|][biuf][0-9]{1,2})', 'fortran_order': False, "
                         rb"'shape': \(((?:[0-9]+, ?)*[0-9]*)\), \} *\n?")
_NPY_MAGIC = b"\x93NUMPY\x01\x00"


def read_npy(data: bytes) -> np.ndarray:
    simple = _read_simple_npy(data)
    if simple is not None:
        return simple
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        if "pickle" in str(exc).lower():  # numpy's own words would suggest loading it "unsafely"
            raise _bad("The .npy array holds Python objects (pickled data), which the hub never loads; send a "
                       "numeric or boolean array (np.save of an array with a number dtype).")
        raise _bad(f"The body is not a readable .npy array ({str(exc)[:200]}).")


def _read_simple_npy(data: bytes) -> np.ndarray | None:
    """The array of a plain .npy (version 1.0, numeric, C order) as a view of ``data``, without np.load's
    header parser (it compiles the header with ``ast``: ~0.1 ms a request); None for anything else."""
    if not data.startswith(_NPY_MAGIC) or len(data) < 10:
        return None
    (length,) = struct.unpack_from("<H", data, 8)
    match = _SIMPLE_NPY.fullmatch(data, 10, 10 + length)
    if match is None:
        return None
    dtype = np.dtype(match.group(1).decode())
    shape = tuple(int(dim) for dim in match.group(2).split(b",") if dim.strip())
    count = math.prod(shape)
    if len(data) - 10 - length != count * dtype.itemsize:
        return None  # np.load says what is wrong
    return np.frombuffer(data, dtype, count=count, offset=10 + length).reshape(shape)


def write_npy(array: np.ndarray) -> bytes:
    """``np.save``'s bytes (format 1.0) for a numeric array, written without a file object."""
    if array.dtype.hasobject:
        raise ValueError("object arrays cannot be saved without pickle")
    header = f"{{'descr': {array.dtype.str!r}, 'fortran_order': False, 'shape': {tuple(array.shape)!r}, }}"
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"  # numpy aligns the data to 64 bytes
    return b"".join([_NPY_MAGIC, struct.pack("<H", len(header)), header.encode("latin1"),
                     np.ascontiguousarray(array).tobytes()])


def read_npz(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of an .npz body, refused (413) before inflating when compressed members would add more than
    ``HUB_INFER_INFLATE_MAX_MB`` or an array's header declares more bytes than it holds (400)."""
    try:
        return archives.read_npz(data, settings.HUB_INFER_INFLATE_MAX_BYTES, "The .npz body")
    except archives.ArchiveTooLarge as exc:
        raise HubError("request_too_large", str(exc))
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise _bad(f"The body is not a readable .npz archive ({exc}); object arrays are refused.")


def from_json(value: Any, names: list[str]) -> dict[str, Any]:
    """``{"x": [[...]]}`` keyed by input name, or a bare array for a model with one input."""
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and len(names) == 1:
        return {names[0]: value}
    raise _bad("inputs must be an object keyed by input name"
               + (f" ({', '.join(names)})" if names else "") + ", or an array for a one-input model.")


def _kind_of(array: np.ndarray) -> str:
    """What an array that is not numeric holds, in words."""
    if array.dtype.kind in "US":
        return "text"
    if array.dtype.kind == "O":
        return "mixed values (text, null or nested lists of different depths)"
    return f"{array.dtype.name} values"


def _json_array(name: str, value: Any, dtype: np.dtype, spec: list[dict[str, Any]]) -> np.ndarray:
    try:
        array = np.asarray(value)
    except ValueError:
        raise _bad(f"Input {name!r} is not a rectangular array (its rows have different lengths).",
                   expected=describe(spec))
    if array.dtype.kind not in "biuf":
        raise _bad(f"Input {name!r} must hold numbers or booleans, not {_kind_of(array)}.", expected=describe(spec))
    return array.astype(dtype, copy=False)


def check(arrays: dict[str, Any], spec: list[dict[str, Any]] | None, *, from_json_body: bool = False
          ) -> dict[str, np.ndarray]:
    """Match the inputs to the signature: names, dtypes (safe casts allowed), ranks, fixed sizes and
    the consistency of named dynamic axes. Returns the arrays to run; a 400 names what was expected."""
    if not spec:  # no recorded signature: pass arrays through as they are
        return {name: np.asarray(value) for name, value in arrays.items()}
    expected = {item["name"]: item for item in spec}
    missing = [name for name in expected if name not in arrays]
    unknown = [name for name in arrays if name not in expected]
    if missing or unknown:
        if len(arrays) == len(expected) and all(re.fullmatch(r"arr_\d+", name) for name in arrays):
            # np.savez(path, a, b) names arrays by position: arr_0, arr_1, ...
            arrays = dict(zip(expected, (arrays[f"arr_{i}"] for i in range(len(arrays))), strict=True))
        else:
            raise _bad(f"The model expects inputs {', '.join(expected)}; "
                       + (f"missing {', '.join(missing)}" if missing else "")
                       + ("; " if missing and unknown else "")
                       + (f"unknown {', '.join(unknown)}" if unknown else "") + ".",
                       expected=describe(spec))
    out: dict[str, np.ndarray] = {}
    axes: dict[str, tuple[int, str]] = {}
    for name, item in expected.items():
        want = np.dtype(item.get("dtype") or "float32")
        value = arrays[name]
        if from_json_body or not isinstance(value, np.ndarray):
            array = _json_array(name, value, want, spec)
        else:
            array = value
            if array.dtype != want:
                if not np.can_cast(array.dtype, want, casting="same_kind"):
                    raise _bad(f"Input {name!r} has dtype {array.dtype.name}; the model expects {want.name}.",
                               expected=describe(spec))
                array = array.astype(want)
        shape = item.get("shape")
        if shape is not None:
            if array.ndim != len(shape):
                raise _bad(f"Input {name!r} has {array.ndim} dimension(s) {list(array.shape)}; the model expects "
                           f"{len(shape)}: {shape_text(shape)}.", expected=describe(spec))
            for axis, (dim, size) in enumerate(zip(shape, array.shape, strict=True)):
                if isinstance(dim, int) and dim != size:
                    raise _bad(f"Input {name!r} has size {size} on axis {axis}; the model expects {dim} "
                               f"(shape {shape_text(shape)}).", expected=describe(spec))
                if isinstance(dim, str):
                    seen = axes.setdefault(dim, (size, name))
                    if seen[0] != size:
                        raise _bad(f"Axis {dim!r} is {seen[0]} in input {seen[1]!r} but {size} in input {name!r}.",
                                   expected=describe(spec))
        out[name] = array
    return out


def shape_text(shape: Any) -> str:
    """A shape as people read it: ``[batch, 784]``, ``[?, 4]`` for an unnamed dynamic axis (not a Python
    list's repr with quotes and ``None``)."""
    if not isinstance(shape, list | tuple):
        return "[]" if shape is None else str(shape)
    return "[" + ", ".join("?" if dim is None else str(dim) for dim in shape) + "]"


def describe(spec: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [{"name": s["name"], "shape": s.get("shape"), "dtype": s.get("dtype", "float32")} for s in spec or []]


def to_jsonable(array: np.ndarray) -> Any:
    """A nested list; NaN and infinities (not valid JSON) become null."""
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        return [to_jsonable(row) for row in array] if array.ndim else (
            None if not math.isfinite(float(array)) else float(array))
    return array.tolist()


def encode(outputs: dict[str, np.ndarray], fmt: str, info: dict[str, Any]) -> tuple[bytes, str]:
    """The response body and its media type."""
    if fmt == "npy":
        if len(outputs) != 1:
            raise HubError("not_acceptable", f"The model has {len(outputs)} outputs; ask for npz or json.")
        return write_npy(np.asarray(next(iter(outputs.values())))), NPY
    if fmt == "npz":
        buffer = io.BytesIO()
        np.savez(buffer, **outputs)
        return buffer.getvalue(), NPZ
    body = {"outputs": {name: to_jsonable(array) for name, array in outputs.items()},
            "shapes": {name: list(array.shape) for name, array in outputs.items()},
            "dtypes": {name: array.dtype.name for name, array in outputs.items()}, **info}
    return orjson.dumps(body), JSON
