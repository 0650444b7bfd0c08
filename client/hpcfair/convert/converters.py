"""Load a model with its own framework and export it to ONNX. Runs inside the sandbox only.

Each ``export_*`` returns an ``Exported``: the ONNX model, a ``reference`` that runs the original
model on the same inputs (for verification), the input signature used and what did the converting.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert import families, pickles, tables
from hpcfair.convert.errors import ConversionError, log_cause, token
from hpcfair.convert.exported import (
    Exported,
    Reference,
    export_folder_path,
    flatten,
    holds_complex,
    torch_error,
    torch_reference,
    versions,
    written,
)
from hpcfair.convert.formats import extract_archive
from hpcfair.convert.signature import TensorSpec, generate_inputs, specs_from_arrays


def _example(specs: list[TensorSpec], sample: dict[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    return sample if sample else generate_inputs(specs, run=0)


# --- PyTorch ---------------------------------------------------------------------------------------


def export_torchscript(path: Path, opset: int, specs: list[TensorSpec], sample: dict | None, **_: object) -> Exported:
    import torch

    try:
        module = torch.jit.load(str(path), map_location="cpu").eval()
    except Exception as exc:  # noqa: BLE001 - any load error means the file is not usable TorchScript
        raise ConversionError("corrupt_file", f"{path.name} could not be loaded as TorchScript (torch.jit.load); the "
                                              "file is damaged or was saved by another torch.", cause=exc)
    if not specs and sample:
        specs = specs_from_arrays(sample)
    if not specs:
        raise ConversionError(
            "signature_required",
            f"{path.name} is TorchScript, which does not record its input shapes. Give them as inputs: [{{name: x, "
            "shape: [null, 3, 224, 224], dtype: float32}] (null: a dynamic axis) in the conversion config's task_args "
            "or the version's metadata, or give sample inputs (task_args.input or sample_inputs: an .npy for one "
            "input, an .npz keyed by input name).",
        )
    feeds = _example(specs, sample)
    names = [spec.name for spec in specs]
    args = tuple(torch.from_numpy(feeds[name]) for name in names)
    with torch.no_grad():
        outputs = flatten(module(*args))
    output_names = ["output"] if len(outputs) == 1 else [f"output_{i}" for i in range(len(outputs))]
    dynamic = {spec.name: {axis: (spec.shape[axis] or f"{spec.name}_dim{axis}") for axis in spec.dynamic_axes}
               for spec in specs if spec.dynamic_axes}
    if any(0 in axes for axes in dynamic.values()):
        dynamic.update({name: {0: "batch"} for name in output_names})
    from hpcfair.convert import spectral, torch_ops

    tensors = [*module.parameters(), *module.buffers()]
    if spectral.uses_spectral(spectral.script_ops(module), tensors):
        try:
            model = spectral.export(module, args, opset, names, output_names,
                                    [sorted(dynamic.get(name, {})) for name in names])
        except ConversionError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise torch_error(exc, opset, complex_weights=True)
        return Exported(model, torch_reference(module, names), specs, SPECTRAL_CONVERTER,
                        versions("torch", "onnx", "onnxscript"), notes={"spectral": SPECTRAL_NOTE})
    torch_ops.register()
    target = export_folder_path()
    try:
        torch.onnx.export(module, args, str(target), dynamo=False, opset_version=opset, input_names=names,
                          output_names=output_names, dynamic_axes=dynamic or None)
    except Exception as exc:  # noqa: BLE001 - mapped to a coded error
        error = torch_error(exc, opset, holds_complex(tensors))
        try:  # a traced graph the TorchScript exporter cannot take (a rank it lost): re-run it op by op for dynamo
            model = spectral.export(module, args, opset, names, output_names,
                                    [sorted(dynamic.get(name, {})) for name in names])
        except Exception as second:  # noqa: BLE001 - the first exporter's failure is the one to report
            log_cause("the second route (the graph re-run for torch.onnx.export(dynamo=True))", second)
            raise error from None
        note = (f"the TorchScript exporter failed ({type(exc).__name__}); the traced graph was re-run op by op "
                "and exported with torch.onnx.export(dynamo=True)")
        return Exported(model, torch_reference(module, names), specs, RERUN_CONVERTER,
                        versions("torch", "onnx", "onnxscript"), notes={"exporter_note": note})
    model, on_disk = written(target)
    return Exported(model, torch_reference(module, names), specs, "torch.onnx.export (TorchScript exporter)",
                    versions("torch", "onnx"), path=on_disk)


def export_torch_program(path: Path, opset: int, specs: list[TensorSpec], sample: dict | None, **_: object) -> Exported:
    import torch

    from hpcfair.convert import experts

    try:
        program = torch.export.load(str(path))
    except Exception as exc:  # noqa: BLE001
        program = experts.load_program(path)  # one that names transformers' own operators (its MoE experts)
        if program is None:
            raise ConversionError("corrupt_file", f"{path.name} could not be loaded as a torch.export program "
                                                  "(torch.export.load); the file is damaged or was saved by another "
                                                  "torch.", cause=exc) from None
    loaded = program  # the reference: the program as saved, its own operators included
    program, decomposed = experts.decompose(program)
    args, kwargs = program.example_inputs or ((), {})
    if sample:
        args = tuple(torch.from_numpy(array) for array in sample.values())
    elif not args and specs:
        args = tuple(torch.from_numpy(a) for a in generate_inputs(specs).values())
    from hpcfair.convert import spectral

    module = program.module()
    tensors = [*program.state_dict.values(), *program.constants.values()]
    if spectral.uses_spectral(spectral.program_ops(module), tensors) and not kwargs:
        try:
            model = spectral.export(module, args, opset, [spec.name for spec in program_inputs(module)], None,
                                    [spec.dynamic_axes for spec in program_inputs(module)])
        except ConversionError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise torch_error(exc, opset, complex_weights=True)
        names = [value.name for value in model.graph.input]
        return Exported(model, torch_reference(module, names), specs, SPECTRAL_CONVERTER,
                        versions("torch", "onnx", "onnxscript"), notes={"spectral": SPECTRAL_NOTE})
    target = export_folder_path()
    try:  # written with its weights beside it (any size), taken in again below when they are small
        torch.onnx.export(program, args, str(target), kwargs=kwargs or None, dynamo=True, external_data=True,
                          opset_version=opset, verbose=False)
    except Exception as exc:  # noqa: BLE001
        raise torch_error(exc, opset, holds_complex(tensors), program=True)
    model, on_disk = written(target)
    names = [value.name for value in model.graph.input if value.name not in {i.name for i in model.graph.initializer}]
    reference = torch_reference(loaded.module() if decomposed else module, names)
    return Exported(model, reference, specs, "torch.onnx.export (dynamo, torch.export)",
                    versions("torch", "onnx", "onnxscript"), path=on_disk,
                    notes={"experts": experts.PROGRAM_NOTE} if decomposed else {})


RERUN_CONVERTER = "torch.onnx.export (dynamo) of the traced graph re-run op by op (hpcfair.convert.spectral)"
SPECTRAL_CONVERTER = "torch.onnx.export (dynamo) of the model rewritten in real arithmetic (hpcfair.convert.spectral)"
SPECTRAL_NOTE = ("complex-valued spectral layers (torch.fft, complex weights) were exported in real arithmetic: "
                 "each transform as products with cos/sin tables, each complex tensor as a real and an imaginary part")


def program_inputs(module) -> list[TensorSpec]:
    """A program's user inputs (their placeholders' names) and which of their axes are symbolic."""
    import torch

    found = []
    for node in module.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(value, torch.Tensor):
            dynamic = [axis for axis, size in enumerate(value.shape) if isinstance(size, torch.SymInt)]
            shape = [None if axis in dynamic else int(size) for axis, size in enumerate(value.shape)]
            found.append(TensorSpec(node.name, shape, str(value.dtype).removeprefix("torch.")))
    return found


# --- TensorFlow / Keras -----------------------------------------------------------------------------


def _erfc(ctx, node, name, args) -> None:
    """tf2onnx has no translation of TensorFlow's Erfc, which Keras 3's exact GELU uses (every ConvNeXt and
    transformer block built with keras.activations.gelu): write it as 1 - Erf(x)."""
    from tf2onnx import utils

    dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
    erf = ctx.make_node("Erf", [node.input[0]])
    one = ctx.make_const(utils.make_name(f"{node.name}_one"), np.array(1, dtype=dtype))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


def _tf_convert(function, signature: list, opset: int, what: str):
    import onnx
    import tf2onnx

    try:
        model, _ = tf2onnx.convert.from_function(function, input_signature=signature, opset=opset,
                                                 custom_op_handlers={"Erfc": (_erfc, [])})
        # tf2onnx leaves a TensorFlow operation it cannot translate in the graph (and only logs it)
        left = sorted({node.op_type for node in model.graph.node
                       if node.domain in ("", "ai.onnx") and not onnx.defs.has(node.op_type)})
        if left:
            raise ValueError(f"Unsupported ops: {', '.join(left)}")
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        if re.search(r"Unsupported ops|not supported", text):
            op = token(text, r"(?:Unsupported ops|not supported)[^:]*:\s*[\[(\"']*([\w/.-]+)")
            raise ConversionError(
                "unsupported_operator",
                f"tf2onnx cannot convert the TensorFlow operation {op or '(see the log)'} in {what} at opset "
                f"{opset}. Replace the operation by one tf2onnx supports (see support_status.md in "
                "github.com/onnx/tensorflow-onnx).",
                cause=exc,
            )
        raise ConversionError("conversion_failed", f"tf2onnx could not convert {what} ({type(exc).__name__}). "
                                                   "Check that the model runs in TensorFlow on the inputs given, or "
                                                   "export it as a SavedModel (model.export(path)) and convert that.",
                              cause=exc)
    return model


def name_outputs(model, names: list[str]):
    """Give the ONNX graph's outputs ``names`` in order (tf2onnx names them after TensorFlow's last ops:
    ``Identity:0``, ``Identity_1:0``; issue 41, point 7). A name that is not a valid, unique identifier, or a
    list of the wrong length, leaves the outputs as they are."""
    outputs = list(model.graph.output)
    taken = {value for node in model.graph.node for value in [*node.input, *node.output]}
    taken |= {value.name for value in [*model.graph.input, *model.graph.initializer]}
    wanted = [re.sub(r"[^A-Za-z0-9_.-]", "_", name) for name in names]
    if len(wanted) != len(outputs) or len(set(wanted)) != len(wanted) or not all(wanted):
        return model
    if any(new in taken and new != old.name for new, old in zip(wanted, outputs, strict=True)):
        return model
    renamed = {old.name: new for old, new in zip(outputs, wanted, strict=True) if old.name != new}
    for node in model.graph.node:
        node.input[:] = [renamed.get(value, value) for value in node.input]
        node.output[:] = [renamed.get(value, value) for value in node.output]
    for value in [*model.graph.output, *model.graph.value_info]:
        value.name = renamed.get(value.name, value.name)
    return model


def _keras_output_names(model, count: int) -> list[str]:
    """The Keras model's output names (its output layers'), or output / output_<i>."""
    try:
        structure = model.output
    except (AttributeError, ValueError):  # a subclassed model has no symbolic output
        structure = None
    names = sorted(structure) if isinstance(structure, dict) else list(getattr(model, "output_names", None) or [])
    if len(names) == count and all(isinstance(name, str) and name for name in names):
        return names
    return ["output"] if count == 1 else [f"output_{index}" for index in range(count)]


def export_keras(path: Path, opset: int, specs: list[TensorSpec], sample: dict | None, **_: object) -> Exported:
    import keras
    import tensorflow as tf

    try:
        model = keras.models.load_model(str(path), compile=False, safe_mode=True)
    except ValueError as exc:
        if "lambda" in str(exc).lower() or "safe_mode" in str(exc):
            raise ConversionError(
                "unsafe_model",
                f"{path.name} contains a Lambda layer with Python code, which the hub does not run (Keras "
                "safe_mode). Replace the Lambda by a built-in or registered custom layer.", cause=exc,
            )
        raise _keras_unloadable_error(path, exc)
    except Exception as exc:  # noqa: BLE001
        raise _keras_unloadable_error(path, exc)
    try:
        keras_inputs = list(model.inputs)
    except (AttributeError, ValueError):
        keras_inputs = []
    if not keras_inputs and not specs:
        raise ConversionError(
            "keras_unbuilt",
            f"{path.name} holds a Keras Sequential model that was saved before it was built, so it has no input "
            "shape. Add keras.Input(shape=...) as its first layer before saving, or give the shape in the "
            "version's metadata: inputs: [{name: x, shape: [null, ...], dtype: float32}].",
        )
    if not specs:
        specs = [TensorSpec(_clean(t.name, i), [None, *t.shape[1:]], str(t.dtype)) for i, t in enumerate(keras_inputs)]
    signature = [tf.TensorSpec(spec.shape, spec.dtype, name=spec.name) for spec in specs]
    single = len(specs) == 1

    # Calling the model inside a tf.function works for Sequential and Functional models alike (tf2onnx's
    # from_keras fails on Keras 3 Sequential models).
    @tf.function
    def call(*args):
        return model(args[0] if single else list(args), training=False)

    onnx_model = _tf_convert(call, signature, opset, path.name)
    name_outputs(onnx_model, _keras_output_names(model, len(onnx_model.graph.output)))

    def reference(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        args = [feeds[spec.name] for spec in specs]
        outputs = model(args[0] if single else args, training=False)
        return [np.asarray(t) for t in flatten(outputs)]

    return Exported(onnx_model, reference, specs, "tf2onnx.convert.from_function (Keras model)",
                    versions("tensorflow-cpu", "tensorflow", "keras", "tf2onnx", "onnx"))


def keras_custom_classes(path: Path) -> list[str]:
    """The custom classes a ``.keras`` file's config names (``registered_name`` outside Keras: a class
    registered with ``keras.saving.register_keras_serializable``), read from its ``config.json``; none for
    another file."""
    import json
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except Exception:  # noqa: BLE001 - not a readable .keras zip: no names to give
        return []
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            module, registered = str(node.get("module") or ""), node.get("registered_name")
            if isinstance(registered, str) and registered and not module.startswith("keras") \
                    and registered not in found:
                found.append(registered)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config)
    return found


def _keras_unloadable_error(path: Path, exc: Exception) -> ConversionError:
    """A Keras file that does not load: one naming its custom classes when its config names some (their Python
    code is not here), else the file is called unloadable."""
    custom = keras_custom_classes(path) if path.suffix.lower() == ".keras" else []
    if custom:
        return ConversionError("unsupported_format", f"{path.name} uses the custom class"
                                                     f"{'es' if len(custom) > 1 else ''} {', '.join(custom[:4])} "
                                                     "(registered with keras.saving.register_keras_serializable), "
                                                     "whose Python code the hub does not have or run. Where the "
                                                     "class is defined, export the model with model.export("
                                                     "'model_savedmodel') and upload that folder as a zip whose "
                                                     "name contains 'savedmodel' (a TensorFlow SavedModel needs no "
                                                     "Python classes).", cause=exc)
    return ConversionError("corrupt_file", _keras_unloadable(path), cause=exc)


def _keras_unloadable(path: Path) -> str:
    legacy = (" Keras 3 reads some models from the legacy .h5 format wrongly (MobileNetV3, ConvNeXt): save it "
              "as model.keras instead.") if path.suffix.lower() == ".h5" else ""
    return (f"{path.name} could not be loaded by Keras (keras.models.load_model); the file is damaged, uses a "
            f"custom layer the hub does not have, or was saved by an incompatible Keras.{legacy}")


def _clean(name: str, index: int) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name.split(":")[0])
    return cleaned or f"input_{index}"


def export_savedmodel(path: Path, opset: int, specs: list[TensorSpec], sample: dict | None, **_: object) -> Exported:
    import tensorflow as tf

    directory = path if path.is_dir() else extract_archive(path, Path(tempfile.mkdtemp(dir=path.parent)))
    try:
        loaded = tf.saved_model.load(str(directory))
        function = loaded.signatures["serving_default"]
    except KeyError:
        raise ConversionError("unsupported_format", f"{path.name} has no 'serving_default' signature to convert.")
    except Exception as exc:  # noqa: BLE001
        raise ConversionError("corrupt_file", f"{path.name} could not be loaded as a TensorFlow SavedModel; the "
                                              "folder is damaged or incomplete.", cause=exc)
    structured = function.structured_input_signature[1]
    names = sorted(structured)
    if not specs:
        specs = [TensorSpec(n, [d for d in structured[n].shape.as_list()], structured[n].dtype.name) for n in names]
    signature = [tf.TensorSpec(spec.shape, spec.dtype, name=spec.name) for spec in specs]

    @tf.function
    def call(*args):
        return function(**dict(zip(names, args, strict=True)))

    onnx_model = _tf_convert(call, signature, opset, path.name)
    # The signature's outputs are a dict; tf2onnx keeps flatten's order of it, which is by sorted key.
    output_keys = sorted(function.structured_outputs) if isinstance(function.structured_outputs, dict) else []
    name_outputs(onnx_model, output_keys)

    def reference(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        outputs = function(**{name: tf.constant(feeds[spec.name]) for name, spec in zip(names, specs, strict=True)})
        return [np.asarray(t) for t in flatten(outputs)]

    return Exported(onnx_model, reference, specs, "tf2onnx.convert.from_function (SavedModel signature)",
                    versions("tensorflow-cpu", "tensorflow", "tf2onnx", "onnx"))


# --- scikit-learn -----------------------------------------------------------------------------------


def load_sklearn(path: Path, fmt: str) -> tuple[Any, dict[str, Any]]:
    """Scan, then load through the allowlist (pickle/joblib) or skops' own type check."""
    if fmt == "skops":
        import skops.io

        try:
            untrusted = skops.io.get_untrusted_types(file=str(path))
        except Exception as exc:  # noqa: BLE001 - a damaged or crafted file; its text stays in the log
            raise ConversionError("corrupt_file", f"{path.name} is not a readable skops file.", cause=exc)
        refused = [t for t in untrusted if not pickles.is_allowed(*t.rsplit(".", 1))]
        scan = {"globals": untrusted, "unsafe": refused, "complete": True, "safe": not refused}
        if refused:
            names = ", ".join(pickles.describe(*t.rsplit(".", 1)) for t in refused[:10])
            raise ConversionError("unsafe_pickle", f"{path.name} names types the hub does not trust: {names}; "
                                                   "nothing was loaded.")
        try:
            return skops.io.load(str(path), trusted=untrusted), scan
        except Exception as exc:  # noqa: BLE001
            raise ConversionError("corrupt_file", f"{path.name} could not be loaded by skops.", cause=exc)
    report = pickles.scan(path)
    pickles.refuse_if_unsafe(report, path.name)
    return pickles.restricted_load(path), report.to_dict()


def export_sklearn(path: Path, opset: int, specs: list[TensorSpec], sample: dict | None, *, fmt: str,
                   **_: object) -> Exported:
    model, scan = load_sklearn(path, fmt)  # scanned first: an unsafe pickle is refused before skl2onnx loads (3 s)
    from skl2onnx.common.data_types import FloatTensorType

    if not hasattr(model, "predict") and not hasattr(model, "transform"):
        raise ConversionError("unsupported_format", f"{path.name} holds a {type(model).__name__}, not a fitted "
                                                    "scikit-learn estimator.")
    features = getattr(model, "n_features_in_", None)
    columns = tables.column_specs(model, sample)
    if columns:
        return _export_table_model(path, model, scan, columns, opset)
    if not specs:
        if features is None:
            raise ConversionError("signature_required", f"{path.name}: the estimator does not record "
                                                        "n_features_in_; give inputs: [{name: X, shape: [null, N]}] "
                                                        "in the conversion config or the version's metadata.")
        specs = [TensorSpec("X", [None, int(features)], "float32")]
    specs = [TensorSpec(s.name, s.shape, "float32", s.low, s.high) for s in specs]
    onnx_model = _skl2onnx(model, [(specs[0].name, FloatTensorType(specs[0].shape))], opset, path.name)
    # The ONNX model's float32 values, as float64: KMeans fitted on float64 refuses float32 in predict.
    reference = _sklearn_reference(model, lambda feeds: feeds[specs[0].name].astype(np.float32).astype(np.float64))
    return Exported(onnx_model, reference, specs, "skl2onnx.to_onnx", versions("scikit-learn", "skl2onnx", "onnx"),
                    {"pickle_scan": scan})


def _skl2onnx(model, initial: list, opset: int, name: str):
    from skl2onnx import to_onnx
    from sklearn.base import is_classifier

    _cast_tree_missing_flags()
    if getattr(model, "voting", None) == "soft" and getattr(model, "flatten_transform", False):
        model.flatten_transform = False  # skl2onnx cannot lay out its transform(); predict is the same either way
    try:  # a classifier's probabilities as a tensor (ZipMap's list of dicts compares with nothing)
        return to_onnx(model, initial_types=initial, target_opset={"": opset, "ai.onnx.ml": 3},
                       options={"zipmap": False} if is_classifier(model) else None)
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        what = type(model).__name__
        if "Unable to find a shape calculator" in text or "not supported" in text.lower():
            raise ConversionError("unsupported_operator", f"{name}: skl2onnx cannot convert this {what} (or a part "
                                                          "of it); use estimators skl2onnx supports (its documentation "
                                                          "lists them).", cause=exc)
        raise ConversionError("conversion_failed", f"{name}: skl2onnx could not convert this {what} "
                                                   f"({type(exc).__name__}); check that it predicts on the data it "
                                                   "was fitted on, and that it uses estimators skl2onnx supports.",
                              cause=exc)


def _cast_tree_missing_flags() -> None:
    """skl2onnx 1.20 hands HistGradientBoosting's ``missing_go_to_left`` (a numpy.uint8) to an ONNX ints
    attribute, which onnx 1.23 refuses; every HistGradientBoosting model then failed. Cast it to int."""
    from skl2onnx.common import tree_ensemble

    original = tree_ensemble.add_node
    if getattr(original, "casts_missing_flags", False):
        return

    def add_node(*args, nodes_missing_value_tracks_true=0, **kwargs):
        return original(*args, nodes_missing_value_tracks_true=int(nodes_missing_value_tracks_true), **kwargs)

    add_node.casts_missing_flags = True
    tree_ensemble.add_node = add_node


def _sklearn_reference(model, features_of) -> Reference:
    """The estimator's own outputs as skl2onnx lays them out:
    - a classifier: (label, probabilities), or (label, decision scores) without ``predict_proba`` (two
      columns, ``-d`` and ``d``, for a binary one);
    - a clusterer: (label, probabilities) or (label, distances from ``transform``);
    - an outlier detector: (label, decision scores), as columns;
    - a regressor: the prediction as a column; a transformer: the transform."""
    from sklearn.base import is_classifier

    kind = "classifier" if is_classifier(model) else getattr(model, "_estimator_type", None)
    if kind is None and hasattr(model, "__sklearn_tags__"):
        kind = model.__sklearn_tags__().estimator_type

    def reference(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        features = features_of(feeds)
        if kind == "classifier":
            if hasattr(model, "predict_proba"):
                return [np.asarray(model.predict(features)), np.asarray(model.predict_proba(features))]
            scores = np.asarray(model.decision_function(features))
            scores = np.stack([-scores, scores], axis=1) if scores.ndim == 1 else scores
            return [np.asarray(model.predict(features)), scores]
        if kind == "clusterer" and hasattr(model, "predict"):
            second = model.predict_proba(features) if hasattr(model, "predict_proba") else model.transform(features)
            return [np.asarray(model.predict(features)), np.asarray(second)]
        if kind == "outlier_detector":
            return [np.asarray(model.predict(features)).reshape(-1, 1),
                    np.asarray(model.decision_function(features)).reshape(-1, 1)]
        if hasattr(model, "predict"):
            prediction = np.asarray(model.predict(features))
            return [prediction.reshape(len(prediction), -1)]
        return [np.asarray(model.transform(features))]

    return reference


def _export_table_model(path: Path, model, scan: dict, columns: list[TensorSpec], opset: int) -> Exported:
    """A model fitted on a DataFrame: one ONNX input per column, the reference fed a DataFrame."""
    onnx_model = _skl2onnx(model, tables.initial_types(columns), opset, path.name)
    return Exported(onnx_model, _sklearn_reference(model, lambda feeds: tables.frame(feeds, columns)), columns,
                    "skl2onnx.to_onnx (one input per DataFrame column)",
                    versions("scikit-learn", "skl2onnx", "pandas", "onnx"), {"pickle_scan": scan})


def export(path: Path, fmt: str, opset: int, specs: list[TensorSpec], sample: dict | None,
           task: str | None = None) -> Exported:
    """Export with the function the family of ``fmt`` (``formats.detect``) names (``task``: a Hugging Face
    folder's head)."""
    found = families.family(fmt)
    if found is None or not found.export:
        raise ConversionError("unsupported_format", f"No converter for format {fmt!r}.")
    return found.exporter()(path, opset, specs, sample, fmt=found.name, task=task)
