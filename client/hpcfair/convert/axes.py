"""Dynamic axes, checked rather than believed: an exporter marks an axis dynamic because it was told to,
but a traced model may have baked the size it saw into a Reshape or a Gather. Each dynamic axis is run at
a second size; an axis that only works at the size it was exported with is fixed in the ONNX model's
signature (so a runtime refuses other sizes plainly) and recorded in the report. When the original model itself
refuses the resized inputs and some inputs are integers, they may index the resized axis (a graph's edge list
and its nodes): the axis is tried again with those values kept below its new size before anything is fixed."""

from __future__ import annotations

from typing import Any

import numpy as np

from hpcfair.convert.errors import ConversionError, log_cause
from hpcfair.convert.signature import TensorSpec

Member = tuple[str, int]  # (input name, axis)


def other_size(size: int, larger: bool = False) -> int:
    """The second size tried on an axis: larger for a batch of 1 or 2 (and short axes), smaller otherwise
    (staying inside a model's maximum sequence length). ``larger``: the size tried when the original refuses
    the smaller one (a spectral layer keeps a number of modes that a short grid does not have)."""
    return size + 2 if size <= 4 else (size + 4 if larger else size - 3)


def groups(inputs: list[TensorSpec], feeds: dict[str, np.ndarray]) -> dict[Any, list[Member]]:
    """The dynamic axes that must change together: those sharing a dimension name, or else the same axis of
    the same size in several inputs (``input_ids`` and ``attention_mask``'s sequence)."""
    names: dict[str, int] = {}
    for spec in inputs:
        for axis in spec.dynamic_axes:
            if isinstance(spec.shape[axis], str):
                names[spec.shape[axis]] = names.get(spec.shape[axis], 0) + 1
    found: dict[Any, list[Member]] = {}
    for spec in inputs:
        for axis in spec.dynamic_axes:
            dim = spec.shape[axis]
            shared = isinstance(dim, str) and names[dim] > 1
            key = ("name", dim) if shared else ("axis", axis, feeds[spec.name].shape[axis])
            found.setdefault(key, []).append((spec.name, axis))
    return found


def resized(feeds: dict[str, np.ndarray], members: list[Member],
            fresh: dict[str, np.ndarray] | None = None, larger: bool = False) -> dict[str, np.ndarray]:
    """``feeds`` with the ``members`` axes at their other size: the values are taken, wrapping, from
    ``fresh`` (other random values) or from ``feeds`` itself (an uploader's sample: real token ids stay
    token ids, masks stay masks)."""
    out = {}
    for name, array in feeds.items():
        source = fresh[name] if fresh is not None and name in fresh else array
        for axis in range(array.ndim):
            size = other_size(array.shape[axis], larger) if (name, axis) in members else array.shape[axis]
            source = np.take(source, np.arange(size) % source.shape[axis], axis=axis)
        out[name] = source
    return out


def wrapped(feeds: dict[str, np.ndarray], members: list[Member],
            fresh: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """``resized``, with every integer input's values kept below the smallest new size of ``members``: inputs
    that index the resized axis (a graph's edge list indexing its nodes) stay valid for it."""
    out = resized(feeds, members, fresh)
    bound = min(other_size(feeds[name].shape[axis]) for name, axis in members)
    return {name: np.abs(array) % bound if np.issubdtype(array.dtype, np.integer) else array
            for name, array in out.items()}


def describe(members: list[Member], feeds: dict[str, np.ndarray], larger: bool = False) -> str:
    return ", ".join(f"{name}[{axis}] {feeds[name].shape[axis]}->{other_size(feeds[name].shape[axis], larger)}"
                     for name, axis in members)


def probe(verify_one, feeds: dict[str, np.ndarray], what: str, reference=None) -> bool | None:
    """Whether the ONNX model runs on ``feeds`` and agrees with the original (a failure is logged, not raised);
    None when the original itself refuses them (``reference``): generated inputs of another size can break a
    relation between inputs (edge indices must stay below the node count), and the original failing on them
    says nothing of whether an axis of the export is static."""
    if reference is not None:
        try:
            reference(feeds)
        except Exception as exc:  # noqa: BLE001 - the original's own error: these inputs are not valid for it
            log_cause(f"{what} (the original model refuses these inputs)", exc)
            return None
    try:
        return bool(verify_one(feeds, what)["passed"])
    except ConversionError as exc:
        log_cause(f"{what} ({exc.code})", exc.cause or exc.detail)
        return False
    except Exception as exc:  # noqa: BLE001
        log_cause(what, exc)
        return False


def refuses(reference, feeds: dict[str, np.ndarray]) -> bool:
    """Whether the original model (``reference``; None for an uploaded ONNX file) fails on ``feeds``."""
    if reference is None:
        return False
    try:
        reference(feeds)
    except Exception:  # noqa: BLE001 - the original's own error
        return True
    return False


def fix(model, fixed: dict[str, dict[int, int]]) -> None:
    """Write the fixed sizes into the ONNX model's input signature."""
    for value in model.graph.input:
        for axis, size in fixed.get(value.name, {}).items():
            dim = value.type.tensor_type.shape.dim[axis]
            dim.Clear()
            dim.dim_value = size
