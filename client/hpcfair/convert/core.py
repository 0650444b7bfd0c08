"""One conversion, start to finish: detect, (scan,) export, verify, save. Runs inside the sandbox."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair import external_data
from hpcfair.compute.errors import CodedError
from hpcfair.convert import axes, families, formats
from hpcfair.convert.converters import export
from hpcfair.convert.errors import ConversionError, log_cause
from hpcfair.convert.exported import Exported, versions
from hpcfair.convert.signature import (
    TensorSpec,
    align_to_inputs,
    generate_inputs,
    load_sample_inputs,
    specs_from_metadata,
    specs_from_onnx,
)
from hpcfair.convert.verify import ATOL, REEXPORT, RTOL, check, merged, verify

DEFAULT_OPSET = 17
MAX_OPSET = 21
# Failures a higher opset may cure: an operator with no translation yet, an exporter's down-conversion that
# left an invalid graph (torch's dynamo exporter writes 18 and converts down).
RAISE_ON = {"unsupported_operator", "invalid_onnx"}


def _opset_of(model) -> int:
    return next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), 0)


def export_lowest(source: Path, fmt: str, opset: int, specs: list[TensorSpec], sample: dict | None,
                  stage: Callable[[float, str], None], task: str | None = None
                  ) -> tuple[Exported, dict[str, Any], dict[str, str]]:
    """Export at ``opset``, or at the lowest higher opset that gives a valid model; returns it, notes that
    say which opset was asked for, which one the model has and why they differ, and ``check``'s result."""
    failures: list[str] = []
    first: ConversionError | None = None
    for candidate in range(opset, MAX_OPSET + 1):
        try:
            exported = export(source, fmt, candidate, specs, sample, task)
            checks = check(exported.model, exported.path)
        except ConversionError as exc:
            if exc.code not in RAISE_ON or candidate == MAX_OPSET:
                if first is None:
                    raise
                log_cause(f"opset {candidate} ({exc.code})", exc.cause)
                # The requested opset's failure says most (an operator's name); a converter that knows no
                # higher opset fails otherwise there.
                first.detail = first.detail.replace(REEXPORT, "")  # the opsets were tried: that is no way out
                first.detail += f" Opsets {opset} to {candidate} were tried."
                first.args = (first.detail,)
                raise first from None
            first = first or exc
            log_cause(f"opset {candidate} ({exc.code})", exc.cause)
            failures.append(f"{candidate}: {exc.code}")
            stage(0.1, f"opset {candidate} did not work ({exc.code}); trying {candidate + 1}")
            continue
        got = _opset_of(exported.model)
        notes: dict[str, Any] = {"opset_requested": opset}
        if failures:
            notes["opset_note"] = (f"opset {opset} was asked for; the model has opset {got}, the lowest that "
                                   f"worked (failed: {', '.join(failures)}).")
        elif got > opset:
            notes["opset_note"] = (f"opset {opset} was asked for; {exported.converter} writes opset {got}, the "
                                   "lowest it can.")
        if "opset_note" in notes:
            stage(0.5, notes["opset_note"])
        return exported, notes, checks
    raise AssertionError("unreachable")


def _first_run(model, user_specs: list[TensorSpec], sample: dict[str, np.ndarray] | None):
    """The inputs to verify on first: the uploader's samples, or generated ones; and fresh values for the
    runs at other sizes (None: resize the sample itself)."""
    if sample:
        return sample, "sample inputs", None
    inputs, _ = specs_from_onnx(model)
    by_name = {spec.name: spec for spec in user_specs}
    if user_specs and not set(by_name) & {s.name for s in inputs} and len(user_specs) == len(inputs):
        by_name = {onnx_spec.name: spec for onnx_spec, spec in zip(inputs, user_specs, strict=True)}
    merged = []
    for spec in inputs:
        given = by_name.get(spec.name)
        low, high, values = (given.low, given.high, given.values) if given else (None, None, None)
        merged.append(TensorSpec(spec.name, spec.shape, spec.dtype, low, high, values))
    return generate_inputs(merged, run=0), "generated", generate_inputs(merged, run=1)


def verify_runs(model, reference, first, label: str, fresh, atol: float, rtol: float, *, can_fix: bool,
                stage: Callable[[float, str], None], checks: dict[str, str] | None = None,
                path: Path | None = None) -> tuple[dict[str, Any], dict[str, dict[int, int]], list[str]]:
    """Verify on the first inputs, then at a second size of every dynamic axis. When the first run agrees
    with the original, axes that fail at their second size are fixed in ``model`` (``can_fix``: not for an
    uploaded ONNX file) and returned; a model that differs already at the first size fixes nothing.

    A failure on inputs the converter made is not evidence by itself: when the original model refuses an
    axis's other size and the model has integer inputs (edge lists, indices), the axis is tried again with
    those values kept below the new size (``axes.wrapped``); it is fixed only when the model fails then too.
    Axes verified that way are returned (third) and their runs are part of the report."""
    checks = checks or check(model, path)
    report = verify(model, reference, [(first, label)], atol, rtol, checks, path)
    inputs, _ = specs_from_onnx(model)
    found = axes.groups(inputs, first)
    every = [member for members in found.values() for member in members]
    if not every:
        return report, {}, []
    fixed: dict[str, dict[int, int]] = {}
    coupled: list[tuple[dict[str, np.ndarray], str]] = []  # runs of axes checked with related values
    coupled_members: list[tuple[str, int]] = []
    grown: list[tuple[dict[str, np.ndarray], str]] = []  # runs of axes checked at a larger size
    grown_members: list[tuple[str, int]] = []
    related = any(np.issubdtype(array.dtype, np.integer) for array in first.values())
    if can_fix and report["passed"]:
        def probe(feeds, what):
            return verify(model, reference, [(feeds, what)], atol, rtol, checks, path)

        original = reference if related else None  # with integer inputs, ask the original first
        if axes.probe(probe, axes.resized(first, every, fresh), "all dynamic axes resized", original) is not True:
            for members in found.values():
                what = axes.describe(members, first)
                smaller = axes.resized(first, members, fresh)
                verdict = axes.probe(probe, smaller, what, original)
                if verdict is None:  # the original refuses them: keep integer values below the new size
                    feeds = axes.wrapped(first, members, fresh)
                    what = f"{label}, other sizes ({what}) with integer inputs kept below them"
                    verdict = axes.probe(probe, feeds, what, reference)
                    if verdict:
                        coupled.append((feeds, what))
                        coupled_members += members
                        continue
                larger = any(axes.other_size(first[name].shape[axis], True) != axes.other_size(first[name].shape[axis])
                             for name, axis in members)
                if not verdict and larger and axes.refuses(reference, smaller):
                    # the original refuses the smaller size (too few modes for a spectral layer): try a larger one
                    feeds = axes.resized(first, members, fresh, larger=True)
                    bigger = axes.probe(probe, feeds, axes.describe(members, first, larger=True), reference)
                    if bigger:
                        grown.append((feeds, f"{label}, a larger size ({axes.describe(members, first, True)}), "
                                             "the original refusing the smaller one"))
                        grown_members += members
                        continue
                if not verdict:
                    for name, axis in members:
                        fixed.setdefault(name, {})[axis] = int(first[name].shape[axis])
        if fixed:
            axes.fix(model, fixed)
            stage(0.7, "fixed at the exported size (the model fails or differs at another size): "
                       + ", ".join(f"{name}[{axis}]={size}" for name, sizes in fixed.items()
                                   for axis, size in sizes.items()))
        if coupled_members:
            stage(0.7, "checked at another size with the integer inputs kept below it (they index it): "
                       + axes.describe(coupled_members, first))
    dynamic = [member for member in every if member[1] not in fixed.get(member[0], {})
               and member not in coupled_members and member not in grown_members]
    named = [f"{name}[{axis}]" for name, axis in coupled_members]
    runs = coupled + grown + ([(axes.resized(first, dynamic, fresh), f"{label}, other sizes for the dynamic axes ("
                                                             f"{axes.describe(dynamic, first)})")] if dynamic else [])
    if not runs:
        return report, fixed, named
    return merged(report, verify(model, reference, runs, atol, rtol, checks, path)), fixed, named


FLOAT16_TOLERANCE = 1e-2  # atol and rtol for float16 outputs: half precision keeps ~3 significant digits


def tolerances(model, atol: float, rtol: float) -> tuple[float, float, str]:
    """The tolerances to compare ``model``'s outputs with: those asked for, widened to ``FLOAT16_TOLERANCE``
    when an output is float16 (the original runs in float16 too, but sums in another order); and a note
    saying so."""
    from onnx import TensorProto

    half = [value.name for value in model.graph.output
            if value.type.tensor_type.elem_type in (TensorProto.FLOAT16, TensorProto.BFLOAT16)]
    if not half or (atol >= FLOAT16_TOLERANCE and rtol >= FLOAT16_TOLERANCE):
        return atol, rtol, ""
    wide = max(atol, FLOAT16_TOLERANCE), max(rtol, FLOAT16_TOLERANCE)
    return (*wide, f"{', '.join(half)} are float16 (the checkpoint's precision): compared with atol {wide[0]:g} "
                   f"and rtol {wide[1]:g} instead of {atol:g} and {rtol:g}")


def _read_onnx(source: Path):
    """An uploaded ONNX file: whole, or its graph and its path when its weights are in data files beside it."""
    import onnx

    try:
        model = onnx.load(str(source), load_external_data=False)
    except Exception as exc:  # noqa: BLE001
        raise ConversionError("corrupt_file", f"{source.name} is not a readable ONNX file.", cause=exc)
    if not external_data.locations(model):
        return model, None
    try:
        external_data.check_locations(model, source.parent)
    except CodedError as exc:
        raise ConversionError("invalid_onnx", f"{source.name}: {exc.detail}")
    return model, source


def save(model, output: Path, path: Path | None) -> list[str]:
    """Write ``model`` at ``output``; one whose weights live beside ``path`` gets its data files moved beside
    ``output``. Returns their names (relative to ``output``'s folder)."""
    import onnx

    onnx.save_model(model, str(output))
    if path is None:
        return []
    names = external_data.locations(model)
    for name in names:
        target = output.parent / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (path.parent / name).resolve() != target.resolve():
            shutil.move(path.parent / name, target)
    return names


def convert(source: Path, output: Path, *, opset: int = DEFAULT_OPSET, inputs: Any = None,
            sample_inputs: Path | None = None, atol: float = ATOL, rtol: float = RTOL, task: str | None = None,
            stage: Callable[[float, str], None] = lambda fraction, what: None) -> dict[str, Any]:
    """Convert ``source`` to ONNX at ``output`` and verify it; an ONNX source is validated and copied.
    ``stage(fraction, what)`` hears where it is (the job's progress, the client's lines)."""

    fmt = formats.detect(source)
    exporting = "" if fmt == "onnx" else f" and exporting to ONNX (opset {opset})"
    stage(0.05, f"{source.name} is {fmt}; loading it{exporting}")
    if not 7 <= opset <= 21:
        raise ConversionError("opset_unsupported", f"onnx_version {opset} is out of range; use 7..21 (17 is safe).")
    user_specs = specs_from_metadata(inputs)
    sample = load_sample_inputs(sample_inputs, user_specs or None) if sample_inputs else None
    if fmt == "onnx":
        model, path = _read_onnx(source)
        reference, converter, libraries, notes, checks = None, None, versions("onnx"), {}, None
    else:
        exported, opset_notes, checks = export_lowest(source, fmt, opset, user_specs, sample, stage, task)
        model, reference, path = exported.model, exported.reference, exported.path
        converter, libraries, notes = exported.converter, exported.libraries, {**exported.notes, **opset_notes}
        user_specs = user_specs or exported.inputs
    if path is not None:
        size = sum((path.parent / name).stat().st_size for name in external_data.locations(model))
        stage(0.5, f"the weights ({size / 2**30:.2f} GiB) are kept in a data file beside the ONNX file (ONNX "
                   "external data)")
    atol, rtol, tolerance_note = tolerances(model, atol, rtol)
    if tolerance_note:
        notes["tolerance_note"] = tolerance_note
    if sample:
        sample = align_to_inputs(sample, specs_from_onnx(model)[0], sample_inputs.name)
    first, label, fresh = _first_run(model, user_specs, sample)
    stage(0.6, "checking the ONNX model and comparing its outputs with the original, also at a second size of "
               "every dynamic axis")
    report, fixed, coupled = verify_runs(model, reference, first, label, fresh, atol, rtol,
                                         can_fix=fmt != "onnx", stage=stage, checks=checks, path=path)
    if fixed:
        notes["fixed_axes"] = fixed
    if coupled:
        notes["coupled_axes"] = coupled
    model_inputs, model_outputs = specs_from_onnx(model)
    stage(0.95, "verified; writing the ONNX file" if report["passed"] else "outputs differ; writing the ONNX file")
    data_files = save(model, output, path)
    params = sum(int(np.prod(init.dims)) for init in model.graph.initializer)
    return {
        "source": source.name,
        "source_format": fmt,
        "framework": families.FAMILIES[fmt].framework,
        "converted": fmt != "onnx",
        "converter": converter,
        "libraries": {**libraries, **report["runtime"]},
        "opset": {entry.domain or "ai.onnx": entry.version for entry in model.opset_import},
        "ir_version": model.ir_version,
        "inputs": [spec.to_dict() for spec in model_inputs],
        "outputs": [spec.to_dict() for spec in model_outputs],
        "parameters": params,
        "verification": report,
        "data_files": data_files,
        **notes,
    }
