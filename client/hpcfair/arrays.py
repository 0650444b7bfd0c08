"""Inputs and outputs as files: ``.npy``, ``.npz``, ``.json`` and text (``.txt``, ``.csv``, ``.tsv``).

A text file holds one array (rows of numbers; ``,`` in ``.csv``, tabs or spaces otherwise), or a table
whose first row names the columns (one array per column). Written text
outputs start each array with a comment line ``# name shape dtype`` and store higher ranks as rows of
the flattened trailing axes, so ``read_outputs`` gives the arrays back with their shapes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.errors import ConfigError

TEXT = {".txt": None, ".tsv": "\t", ".csv": ","}
FORMATS = (".npy", ".npz", ".json", *TEXT)
_HEADER = re.compile(r"^#\s*(\S+)\s+\(([\d,\s]*)\)\s+(\w+)\s*$")


def _unknown(path: Path, key: str) -> ConfigError:
    return ConfigError(f"{path.name}: use one of {', '.join(FORMATS)}", key=key)


def read_inputs(path: str | Path, key: str = "task_args.input") -> dict[str, np.ndarray] | np.ndarray:
    """The arrays in ``path``: a dict (``.npz``, a JSON object, a text file with headers) or one array."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise _unknown(path, key)
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                return {name: archive[name] for name in archive.files}
        if suffix == ".json":
            data = json.loads(path.read_text())
            if isinstance(data, dict):
                return {name: np.asarray(value) for name, value in data.items()}
            return np.asarray(data)
        arrays = _read_text(path, TEXT[suffix])
        return arrays if len(arrays) > 1 or "" not in arrays else arrays[""]
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", key=key)


def _read_text(path: Path, delimiter: str | None) -> dict[str, np.ndarray]:
    """Arrays separated by ``# name (shape) dtype`` headers; a file without headers is one array."""
    arrays: dict[str, np.ndarray] = {}
    name, shape, dtype, rows = "", None, None, []

    def flush() -> None:
        if name or rows:
            array = np.loadtxt(rows, delimiter=delimiter, ndmin=2 if len(rows) > 1 else 1) if rows else np.array([])
            if shape is not None:
                array = array.astype(dtype).reshape(shape)
            arrays[name] = array

    lines = path.read_text().splitlines()
    data = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if data and not any(_HEADER.match(line.strip()) for line in lines) and not _numeric(data[0], delimiter):
        return _table(path, delimiter)
    for line in lines:
        header = _HEADER.match(line.strip())
        if header:
            flush()
            name, dtype, rows = header.group(1), header.group(3), []
            shape = tuple(int(n) for n in header.group(2).replace(" ", "").split(",") if n)
        elif line.strip() and not line.lstrip().startswith("#"):
            rows.append(line)
    flush()
    return arrays


def _numeric(line: str, delimiter: str | None) -> bool:
    try:
        [float(token) for token in line.split(delimiter) if token.strip()]
    except ValueError:
        return False
    return True


def _table(path: Path, delimiter: str | None) -> dict[str, np.ndarray]:
    """A table whose first row names the columns: one array per column (text columns as strings)."""
    table = np.genfromtxt(path, delimiter=delimiter, names=True, dtype=None, encoding="utf-8")
    return {name: np.asarray(table[name]) for name in table.dtype.names}


def write_outputs(path: str | Path, outputs: dict[str, np.ndarray]) -> Path:
    """Write ``outputs`` in the form ``path``'s suffix names."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise _unknown(path, "out_args.export_file")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".npy":
        if len(outputs) != 1:
            raise ConfigError(f"{path.name}: the result has {len(outputs)} outputs ({', '.join(outputs)}); "
                              ".npy holds one: use .npz, .json or .txt", key="out_args.export_file")
        np.save(path, next(iter(outputs.values())), allow_pickle=False)
    elif suffix == ".npz":
        np.savez(path, **outputs)
    elif suffix == ".json":
        path.write_text(json.dumps({name: array.tolist() for name, array in outputs.items()}))
    else:
        delimiter = TEXT[suffix] or " "
        with open(path, "w") as handle:
            for name, array in outputs.items():
                shape = ", ".join(str(n) for n in array.shape) + ("," if array.ndim == 1 else "")
                handle.write(f"# {name} ({shape}) {array.dtype.name}\n")
                rows = array.reshape(1, -1) if array.ndim < 2 else array.reshape(array.shape[0], -1)
                np.savetxt(handle, rows, delimiter=delimiter, fmt="%.9g" if array.dtype.kind == "f" else "%d")
    return path


def read_outputs(path: str | Path) -> dict[str, np.ndarray]:
    """What ``write_outputs`` wrote, as a dict."""
    arrays = read_inputs(path, key="out_args.export_file")
    return arrays if isinstance(arrays, dict) else {"output": arrays}


def fit(arrays: dict[str, np.ndarray] | np.ndarray, spec: list[dict[str, Any]] | None, *, cast: bool
        ) -> dict[str, np.ndarray]:
    """Name a single array after the model's only input; with ``cast`` (inputs from text or JSON, which
    carry no dtype) convert each array to the dtype the signature declares."""
    names = [item["name"] for item in spec or []]
    if not isinstance(arrays, dict):
        if len(names) > 1:
            raise ConfigError(f"the input file holds one array but the model has {len(names)} inputs "
                              f"({', '.join(names)}); use .npz or a JSON object keyed by input name",
                              key="task_args.input")
        arrays = {names[0] if names else "input": arrays}
    if cast:
        declared = {item["name"]: item for item in spec or []}
        arrays = {name: _cast(array, declared.get(name)) for name, array in arrays.items()}
    return arrays


def _cast(array: np.ndarray, item: dict[str, Any] | None) -> np.ndarray:
    """To the declared dtype; one row read from text gets the batch axis the model expects."""
    if not item:
        return array
    shape = item.get("shape")
    if isinstance(shape, list) and len(shape) == array.ndim + 1:
        array = array[np.newaxis]
    return array.astype(item["dtype"]) if item.get("dtype") else array
