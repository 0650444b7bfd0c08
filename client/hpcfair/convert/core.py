"""One conversion, start to finish: detect, (scan,) export, verify, save. Runs inside the sandbox."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert import formats
from hpcfair.convert.converters import export, versions
from hpcfair.convert.errors import ConversionError
from hpcfair.convert.signature import (
    TensorSpec,
    align_to_inputs,
    generate_inputs,
    load_sample_inputs,
    specs_from_metadata,
    specs_from_onnx,
)
from hpcfair.convert.verify import ATOL, RTOL, verify

DEFAULT_OPSET = 17


def _runs(model, user_specs: list[TensorSpec], sample: dict[str, np.ndarray] | None):
    """Inputs to verify on: the uploader's samples, or two generated sets (the second with other sizes
    for the dynamic axes)."""
    if sample:
        return [(sample, "sample inputs")]
    inputs, _ = specs_from_onnx(model)
    by_name = {spec.name: spec for spec in user_specs}
    if user_specs and not set(by_name) & {s.name for s in inputs} and len(user_specs) == len(inputs):
        by_name = {onnx_spec.name: spec for onnx_spec, spec in zip(inputs, user_specs, strict=True)}
    merged = []
    for spec in inputs:
        given = by_name.get(spec.name)
        low, high = (given.low, given.high) if given else (None, None)
        merged.append(TensorSpec(spec.name, spec.shape, spec.dtype, low, high))
    runs = [(generate_inputs(merged, run=0), "generated")]
    if any(spec.dynamic_axes for spec in merged):
        runs.append((generate_inputs(merged, run=1), "generated (other sizes for the dynamic axes)"))
    return runs


def convert(source: Path, output: Path, *, opset: int = DEFAULT_OPSET, inputs: Any = None,
            sample_inputs: Path | None = None, atol: float = ATOL, rtol: float = RTOL,
            stage: Callable[[float, str], None] = lambda fraction, what: None) -> dict[str, Any]:
    """Convert ``source`` to ONNX at ``output`` and verify it; an ONNX source is validated and copied.
    ``stage(fraction, what)`` hears where it is (the job's progress, the client's lines)."""
    import onnx

    fmt = formats.detect(source)
    exporting = "" if fmt == "onnx" else f" and exporting to ONNX (opset {opset})"
    stage(0.05, f"{source.name} is {fmt}; loading it{exporting}")
    if not 7 <= opset <= 21:
        raise ConversionError("opset_unsupported", f"onnx_version {opset} is out of range; use 7..21 (17 is safe).")
    user_specs = specs_from_metadata(inputs)
    sample = load_sample_inputs(sample_inputs, user_specs or None) if sample_inputs else None
    if fmt == "onnx":
        try:
            model = onnx.load(str(source))
        except Exception as exc:  # noqa: BLE001
            raise ConversionError("corrupt_file", f"{source.name} is not a readable ONNX file.", cause=exc)
        reference, converter, libraries, notes = None, None, versions("onnx"), {}
    else:
        exported = export(source, fmt, opset, user_specs, sample)
        model, reference = exported.model, exported.reference
        converter, libraries, notes = exported.converter, exported.libraries, exported.notes
        user_specs = user_specs or exported.inputs
    if sample:
        sample = align_to_inputs(sample, specs_from_onnx(model)[0], sample_inputs.name)
    runs = _runs(model, user_specs, sample)
    stage(0.6, f"checking the ONNX model and comparing its outputs with the original on {len(runs)} input set"
               + ("s" if len(runs) != 1 else ""))
    report = verify(model, reference, runs, atol, rtol)
    model_inputs, model_outputs = specs_from_onnx(model)
    stage(0.95, "verified; writing the ONNX file" if report["passed"] else "outputs differ; writing the ONNX file")
    onnx.save_model(model, str(output))
    params = sum(int(np.prod(init.dims)) for init in model.graph.initializer)
    return {
        "source": source.name,
        "source_format": fmt,
        "framework": formats.FRAMEWORK[fmt],
        "converted": fmt != "onnx",
        "converter": converter,
        "libraries": {**libraries, **report["runtime"]},
        "opset": {entry.domain or "ai.onnx": entry.version for entry in model.opset_import},
        "ir_version": model.ir_version,
        "inputs": [spec.to_dict() for spec in model_inputs],
        "outputs": [spec.to_dict() for spec in model_outputs],
        "parameters": params,
        "verification": report,
        **notes,
    }
