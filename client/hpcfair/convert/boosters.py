"""Gradient-boosted trees in their own safe formats: XGBoost's ``save_model`` files (``.json``/``.ubj``)
and LightGBM's text model, converted by onnxmltools. These formats are data (no pickle), loaded in the
sandbox all the same. Runs inside the sandbox only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hpcfair.convert.errors import ConversionError
from hpcfair.convert.signature import TensorSpec

MAX_OPSET = 15  # onnxmltools 1.16 writes at most opset 15 (the ONNX-ML tree operators need no more)


def _classes(objective: str) -> str:
    """classifier (binary), classifier (multi) or regressor, from the objective's name."""
    if objective.startswith(("binary", "reg:logistic")) or objective in ("cross_entropy", "xentropy"):
        return "binary"
    if objective.startswith(("multi", "softmax")) or objective.startswith("multiclass"):
        return "multi"
    return "regression"


def _reference(predict, kind: str, name: str):
    """The booster's own prediction, laid out as onnxmltools' outputs: (label, probabilities) for a
    classifier, one [n, 1] column for a regressor."""
    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        scores = np.asarray(predict(feeds[name]), dtype=np.float64)
        if kind == "regression":
            return [scores.reshape(len(scores), -1)]
        probabilities = np.stack([1 - scores, scores], axis=1) if kind == "binary" else scores
        return [probabilities.argmax(axis=1).astype(np.int64), probabilities]

    return run


def _dynamic_batch(model) -> None:
    """onnxmltools declares LightGBM's label output as [1]; it has one row per input row."""
    for value in model.graph.output:
        dims = value.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value") and dims[0].dim_value == 1:
            dims[0].Clear()
            dims[0].dim_param = "N"


def export_booster(path: Path, opset: int, specs: list[TensorSpec], sample: dict | None, *, fmt: str,
                   **_: object):
    """XGBoost (``fmt`` xgboost) or LightGBM (lightgbm) booster to ONNX with onnxmltools."""
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType

    from hpcfair.convert.exported import Exported, versions

    library = "xgboost" if fmt == "xgboost" else "lightgbm"
    try:
        if fmt == "xgboost":
            import xgboost

            booster = xgboost.Booster()
            booster.load_model(bytearray(path.read_bytes()))  # JSON or UBJSON, told by the content
            features = booster.num_features()
            objective = json.loads(booster.save_config())["learner"]["objective"]["name"]

            def predict(x):
                return booster.predict(xgboost.DMatrix(x))
        else:
            import lightgbm

            booster = lightgbm.Booster(model_file=str(path))
            features = booster.num_feature()
            objective = str(booster.dump_model().get("objective", "regression"))
            predict = booster.predict
    except Exception as exc:  # noqa: BLE001 - a damaged file; the library's text goes to the log
        raise ConversionError("corrupt_file", f"{path.name} could not be loaded by {library}; the file is damaged or "
                                              f"was written by a newer {library}. Save it again with "
                                              "booster.save_model().", cause=exc)
    name = specs[0].name if specs else "X"
    kind = _classes(objective)
    target = min(opset, MAX_OPSET)
    initial = [(name, FloatTensorType([None, int(features)]))]
    try:
        if fmt == "xgboost":
            model = onnxmltools.convert_xgboost(booster, initial_types=initial, target_opset=target)
        else:
            model = onnxmltools.convert_lightgbm(booster, initial_types=initial, target_opset=target, zipmap=False)
    except Exception as exc:  # noqa: BLE001
        raise ConversionError("unsupported_operator", f"{path.name}: onnxmltools cannot convert this {library} model "
                                                      f"(objective {objective!r}); the ONNX-ML tree operators cover "
                                                      "regression and classification objectives.", cause=exc)
    _dynamic_batch(model)
    spec = TensorSpec(name, [None, int(features)], "float32")
    notes = {"objective": objective}
    return Exported(model, _reference(predict, kind, name), [spec], f"onnxmltools.convert_{library}",
                    versions(library, "onnxmltools", "onnx"), notes)
