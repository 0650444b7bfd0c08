"""Verification of an ONNX model: checker, shape inference, a load in ONNX Runtime, and a numerical
comparison of every output against the original framework on the same inputs (HiT's lesson)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert.errors import ConversionError, log_cause, token
from hpcfair.convert.exported import Reference, versions

REEXPORT = " Export it again, with another opset if the exporter allows."  # an uploaded file's way out
ATOL = 1e-4
RTOL = 1e-3


def check(model, path: Path | None = None) -> dict[str, str]:
    """onnx.checker (full) and strict shape inference; returns what each said. ``path``: the model's file,
    whose weights live in data files beside it (checked there, by file, so that no size limit applies)."""
    import onnx

    try:
        onnx.checker.check_model(str(path) if path else model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        text = str(exc)
        op = token(text, r"(?:for operator|op_type:?|Node \()\s*'?(\w+)")
        attribute = token(text, r"[Aa]ttribute:?\s*'?(\w+)")
        where = "".join(f", {k} {v}" for k, v in (("operator", op), ("attribute", attribute)) if v)
        raise ConversionError("invalid_onnx", f"The ONNX model does not pass onnx.checker{where}.{REEXPORT}",
                              cause=exc)
    try:
        if path:
            inferred = path.with_name(f".{path.name}.inferred")
            onnx.shape_inference.infer_shapes_path(str(path), str(inferred), strict_mode=True)
            inferred.unlink()
        else:
            onnx.shape_inference.infer_shapes(model, strict_mode=True)
        shapes = "passed"
    except Exception as exc:  # noqa: BLE001 - a warning in the report, not a failure
        log_cause("strict shape inference", exc)
        shapes = "warning: strict shape inference did not complete; ONNX Runtime still checks the model below"
    return {"checker": "passed", "shape_inference": shapes}


def session(model, threads: int = 0, path: Path | None = None):
    """Load in ONNX Runtime (CPU); an opset the runtime cannot run gets its own code. ``path``: the model's
    file with its data files (ONNX Runtime maps them; ``model`` is then the graph without weights, and is
    written there first when it was changed)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    try:
        if path:
            import onnx

            onnx.save_model(model, str(path))  # the graph as it is now (fixed axes), beside the same data files
            options.add_session_config_entry("session.disable_prepacking", "1")  # no packed copy of the weights
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        opsets = {entry.domain or "ai.onnx": entry.version for entry in model.opset_import}
        if "ir version" in text.lower():
            raise ConversionError(
                "opset_unsupported",
                f"ONNX Runtime {ort.__version__} cannot run ONNX IR version {model.ir_version}. Save the model with "
                "an older onnx/exporter, or set model.ir_version to one the runtime supports.", cause=exc,
            )
        if "opset" in text.lower() or "is under development" in text or "not implemented" in text.lower():
            op = token(text, r"(?:op_type|operator|kernel for)[^\w]{0,4}(\w+)")
            raise ConversionError(
                "opset_unsupported",
                f"ONNX Runtime {ort.__version__} cannot run this model (opsets {opsets}"
                f"{f', operator {op}' if op else ''}). Convert again with a lower onnx_version (opset).", cause=exc,
            )
        raise ConversionError("runtime_load_failed", f"ONNX Runtime {ort.__version__} could not load the model "
                                                     f"({type(exc).__name__}).", cause=exc)


def compare(actual: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> dict[str, Any]:
    """Max abs/rel difference and pass/fail (np.allclose rule; exact for integers, bools and strings)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    result: dict[str, Any] = {"shape": list(actual.shape), "expected_shape": list(expected.shape)}
    if actual.size == expected.size and actual.shape != expected.shape:
        actual = actual.reshape(expected.shape)  # e.g. (n, 1) against (n,)
    if actual.shape != expected.shape:
        return {**result, "passed": False, "problem": "shapes differ"}
    if expected.dtype.kind in "fc" or actual.dtype.kind in "fc":
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        diff = np.abs(a - e)
        max_abs = float(diff.max()) if diff.size else 0.0
        max_rel = float((diff / np.maximum(np.abs(e), 1e-12)).max()) if diff.size else 0.0
        passed = bool(np.allclose(a, e, atol=atol, rtol=rtol, equal_nan=True))
        return {**result, "max_abs_diff": max_abs, "max_rel_diff": max_rel, "passed": passed}
    mismatches = int((actual != expected).sum())
    return {**result, "mismatches": mismatches, "max_abs_diff": float(mismatches > 0), "passed": mismatches == 0}


def describe_inputs(feeds: dict[str, np.ndarray], source: str) -> dict[str, Any]:
    return {name: {"shape": list(a.shape), "dtype": a.dtype.name, "source": source} for name, a in feeds.items()}


def verify(model, reference: Reference | None, runs: list[tuple[dict[str, np.ndarray], str]],
           atol: float = ATOL, rtol: float = RTOL, checks: dict[str, str] | None = None,
           path: Path | None = None) -> dict[str, Any]:
    """Run every input set through ONNX Runtime and, when there is one, the original model (``checks``:
    the result of ``check`` when the caller has it already; ``path``: the file of a model whose weights
    live beside it)."""
    report: dict[str, Any] = {**(checks or check(model, path)), "atol": atol, "rtol": rtol,
                              "runtime": versions("onnxruntime")}
    sess = session(model, path=path)
    output_names = [o.name for o in sess.get_outputs()]
    report["runs"] = []
    passed = True
    for feeds, source in runs:
        try:
            outputs = sess.run(None, feeds)
        except Exception as exc:  # noqa: BLE001
            given = {name: f"{a.dtype.name}{list(a.shape)}" for name, a in feeds.items()}
            wanted = {i.name: f"{i.type}{i.shape}" for i in sess.get_inputs()}
            raise ConversionError(
                "runtime_failed",
                f"ONNX Runtime failed on the {source} inputs {given}; the model takes {wanted}. If only the "
                "second run failed, an axis that should be dynamic (e.g. the batch) was fixed at export.", cause=exc,
            )
        run: dict[str, Any] = {"inputs": describe_inputs(feeds, source), "outputs": []}
        if reference is not None:
            expected = reference(feeds)
            if len(expected) != len(outputs):
                raise ConversionError("verification_failed", f"The ONNX model has {len(outputs)} outputs, the "
                                                             f"original {len(expected)}, so they cannot be compared. "
                                                             "Return a tensor or a tuple of tensors from the model "
                                                             "(not a dict of optional values) and convert again.")
            for name, got, want in zip(output_names, outputs, expected, strict=True):
                row = {"name": name, **compare(got, want, atol, rtol)}
                passed = passed and row["passed"]
                run["outputs"].append(row)
        else:
            shapes = zip(output_names, outputs, strict=True)
            run["outputs"] = [{"name": name, "shape": list(np.shape(value))} for name, value in shapes]
        report["runs"].append(run)
    report["compared"] = reference is not None
    report["passed"] = passed
    return summarised(report)


def summarised(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with its largest difference over every run."""
    report["max_abs_diff"] = max((o.get("max_abs_diff", 0.0) for r in report["runs"] for o in r["outputs"]),
                                 default=0.0)
    return report


def merged(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two reports of the same model as one: every run, passed when both passed."""
    return summarised({**first, "runs": first["runs"] + second["runs"],
                       "passed": first["passed"] and second["passed"]})
