"""The papers' model optimisation: ONNX Runtime graph optimisation and dynamic int8 quantisation, each
measured (file size, latency, output difference against the original). Runs inside the sandbox."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert.errors import ConversionError, log_cause
from hpcfair.convert.signature import generate_inputs, specs_from_onnx

RUNS = 30


def _latency_ms(session, feeds: dict[str, np.ndarray]) -> float:
    session.run(None, feeds)  # warm-up
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def optimize(source: Path, output_dir: Path, *, quantize: bool = True) -> dict[str, Any]:
    """Write ``<stem>.optimized.onnx`` (and ``<stem>.int8.onnx``) into ``output_dir`` and measure them."""
    import onnx
    import onnxruntime as ort

    try:
        model = onnx.load(str(source))
    except Exception as exc:  # noqa: BLE001
        raise ConversionError("corrupt_file", f"{source.name} is not a readable ONNX file.", cause=exc)
    inputs, _ = specs_from_onnx(model)
    feeds = generate_inputs(inputs, run=0)
    output_dir.mkdir(parents=True, exist_ok=True)
    stem = source.name[: -len(".onnx")] if source.name.endswith(".onnx") else source.stem
    baseline = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    expected = baseline.run(None, feeds)
    report: dict[str, Any] = {"original": {"file": source.name, "size": source.stat().st_size,
                                           "latency_ms": _latency_ms(baseline, feeds)}, "variants": {}}
    optimized = output_dir / f"{stem}.optimized.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(optimized)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    targets = [("graph optimisation (ORT_ENABLE_EXTENDED)", optimized)]
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantized = output_dir / f"{stem}.int8.onnx"
        try:
            quantize_dynamic(str(source), str(quantized), weight_type=QuantType.QInt8)
            targets.append(("dynamic int8 quantisation (weights QInt8)", quantized))
        except Exception as exc:  # noqa: BLE001 - the optimised variant is still useful
            log_cause("quantization", exc)
            report["quantization_error"] = f"ONNX Runtime's dynamic quantisation failed ({type(exc).__name__})."
    for method, path in targets:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = session.run(None, feeds)
        diff = max(float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))
                   for a, b in zip(got, expected, strict=True) if np.asarray(b).dtype.kind in "fiu")
        latency = _latency_ms(session, feeds)
        report["variants"][path.name] = {
            "method": method, "size": path.stat().st_size, "latency_ms": latency,
            "speedup": report["original"]["latency_ms"] / latency if latency else None,
            "size_ratio": path.stat().st_size / report["original"]["size"], "max_abs_diff": diff,
        }
    report["inputs"] = {name: list(a.shape) for name, a in feeds.items()}
    report["libraries"] = {"onnxruntime": ort.__version__, "onnx": onnx.__version__}
    return report
