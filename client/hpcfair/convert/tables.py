"""scikit-learn models fitted on a pandas DataFrame: a ``ColumnTransformer`` selects columns by name, so
the ONNX model takes one input per column ([n, 1], strings for text columns), as skl2onnx documents for
such pipelines. Which columns hold text comes from the sample table where there is one, else from the
fitted encoders (their categories are strings). Runs inside the sandbox only."""

from __future__ import annotations

from typing import Any

import numpy as np

from hpcfair.convert.signature import TensorSpec


def _parts(estimator: Any):
    """``estimator`` and every estimator inside it (pipeline steps, column transformers' members)."""
    yield estimator
    for _, step in getattr(estimator, "steps", []):
        yield from _parts(step)
    for entry in getattr(estimator, "transformers_", []):
        yield from _parts(entry[1])


def _column_names(columns: Any, names: list[str]) -> list[str]:
    """A ColumnTransformer's column selection as names (it may select by name, position or mask)."""
    if isinstance(columns, str):
        return [columns]
    selected = list(np.asarray(columns).reshape(-1)) if not callable(columns) else []
    if selected and isinstance(selected[0], (bool, np.bool_)):
        return [name for name, keep in zip(names, selected, strict=False) if keep]
    return [names[int(c)] if isinstance(c, (int, np.integer)) else str(c) for c in selected]


def _categories(model: Any, names: list[str]) -> dict[str, list]:
    """Each column an encoder was fitted on: its categories."""
    found: dict[str, list] = {}
    for part in _parts(model):
        for _, transformer, columns in getattr(part, "transformers_", []):
            if isinstance(columns, str) and columns in ("drop", "passthrough"):
                continue
            encoders = [p for p in _parts(transformer) if hasattr(p, "categories_")]
            if encoders:
                for name, values in zip(_column_names(columns, names), encoders[0].categories_, strict=False):
                    found[name] = [v for v in values.tolist() if v == v]  # NaN is not a category to generate
    return found


def column_specs(model: Any, sample: dict[str, np.ndarray] | None) -> list[TensorSpec] | None:
    """One input per DataFrame column for a model with a ColumnTransformer; None for a model on arrays."""
    names = getattr(model, "feature_names_in_", None)
    if names is None or not any(hasattr(part, "transformers_") for part in _parts(model)):
        return None
    names = [str(n) for n in names]
    categories = _categories(model, names)
    specs = []
    for name in names:
        values = categories.get(name)
        if sample is not None and name in sample:
            text = np.asarray(sample[name]).dtype.kind in "OUS"
        else:
            text = bool(values) and all(isinstance(v, str) for v in values)
        specs.append(TensorSpec(name, [None, 1], "object" if text else "float32", values=values if text else None))
    return specs


def initial_types(specs: list[TensorSpec]) -> list[tuple[str, Any]]:
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    return [(s.name, StringTensorType([None, 1]) if s.dtype == "object" else FloatTensorType([None, 1]))
            for s in specs]


def frame(feeds: dict[str, np.ndarray], specs: list[TensorSpec]):
    """The DataFrame the original model takes for ONNX Runtime's per-column feeds."""
    import pandas as pd

    return pd.DataFrame({s.name: np.asarray(feeds[s.name]).reshape(-1).astype(object if s.dtype == "object"
                                                                                   else np.float32)
                         for s in specs})
