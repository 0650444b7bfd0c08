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

    from hpcfair import external_data

    try:
        model = onnx.load(str(source), load_external_data=False)  # the graph: its weights stay on disk
    except Exception as exc:  # noqa: BLE001
        raise ConversionError("corrupt_file", f"{source.name} is not a readable ONNX file.", cause=exc)
    try:
        source_data = external_data.check_locations(model, source.parent)
    except Exception as exc:  # noqa: BLE001 - a CodedError: a location outside the folder
        raise ConversionError("invalid_onnx", f"{source.name}: {exc}")
    inputs, _ = specs_from_onnx(model)
    feeds = generate_inputs(inputs, run=0)
    output_dir.mkdir(parents=True, exist_ok=True)
    stem = source.name[: -len(".onnx")] if source.name.endswith(".onnx") else source.stem
    baseline = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    expected = baseline.run(None, feeds)
    size = source.stat().st_size + sum((source.parent / name).stat().st_size for name in source_data)
    report: dict[str, Any] = {"original": {"file": source.name, "size": size,
                                           "latency_ms": _latency_ms(baseline, feeds)}, "variants": {}}
    optimized = output_dir / f"{stem}.optimized.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(optimized)
    if source_data:  # a model past 2 GiB: the optimised copy's weights go beside it too
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                         f"{optimized.name}.data")
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    targets = [("graph optimisation (ORT_ENABLE_EXTENDED)", optimized)]
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantized = output_dir / f"{stem}.int8.onnx"
        try:
            quantize_dynamic(str(source), str(quantized), weight_type=QuantType.QInt8,
                             use_external_data_format=bool(source_data))
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
        data = external_data.check_locations(onnx.load(str(path), load_external_data=False), path.parent)
        written = path.stat().st_size + sum((path.parent / name).stat().st_size for name in data)
        report["variants"][path.name] = {
            "method": method, "size": written, "latency_ms": latency,
            "speedup": report["original"]["latency_ms"] / latency if latency else None,
            "size_ratio": written / report["original"]["size"], "max_abs_diff": diff,
            **({"data_files": data} if data else {}),
        }
    report["inputs"] = {name: list(a.shape) for name, a in feeds.items()}
    report["libraries"] = {"onnxruntime": ort.__version__, "onnx": onnx.__version__}
    return report
