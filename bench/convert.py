"""Conversion time and inference latency, native framework vs ONNX Runtime, for the architectures the
tests use (randomly initialised, nothing downloaded); HiT's Table 3 on this machine.

    .venv/bin/python bench/convert.py [--runs 50]

Conversion time is the sandboxed conversion as a worker runs it (subprocess start, framework import,
export, verification). Latency: median of ``--runs`` calls at batch 1 after 5 warm-up calls, on the CPU,
with the same input for both; intra-op threads left at each library's default. Keras runs in
a ``tf.function`` (graph mode); PyTorch under ``no_grad``; scikit-learn's ``predict_proba``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


from hpcfair.convert import convert_file  # noqa: E402
from hpcfair.convert.signature import generate_inputs, specs_from_onnx  # noqa: E402

from tests.conversions import models  # noqa: E402


def native_runner(path: Path, input_names: list[str]):
    """A callable running the original model on a feed dict (this process built it: trusted)."""
    suffix = path.suffix
    if suffix in (".pt", ".pt2"):
        import torch

        module = torch.jit.load(str(path)) if suffix == ".pt" else torch.export.load(str(path)).module()

        def run(feeds):
            with torch.no_grad():
                return module(*[torch.from_numpy(feeds[n]) for n in input_names])

        return run
    if suffix == ".keras":
        import keras
        import tensorflow as tf

        model = keras.models.load_model(path, compile=False)
        graph = tf.function(lambda x: model(x, training=False))  # graph mode, as served; eager is far slower
        return lambda feeds: graph(feeds[input_names[0]])
    import joblib

    model = joblib.load(path)
    return lambda feeds: model.predict_proba(feeds[input_names[0]])


def median_ms(call, feeds, runs: int) -> float:
    for _ in range(5):
        call(feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call(feeds)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    import onnx
    import onnxruntime as ort

    work = Path(tempfile.mkdtemp(prefix="hub-bench-convert-"))
    print(f"# conversion and latency on {platform.node()} ({os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}), {time.strftime('%Y-%m-%d')}; median of {args.runs}, batch 1")
    print(f"{'model':22s} {'convert s':>9s} {'native ms':>10s} {'onnxrt ms':>10s} {'native/ort':>10s} "
          f"{'max abs diff':>12s}")
    for name, build in models.ARCHITECTURES.items():
        filename, metadata = build(work)
        path = work / filename
        start = time.perf_counter()
        report = convert_file(path, work / f"{name}.onnx", inputs=metadata.get("inputs"))
        convert_s = time.perf_counter() - start
        model = onnx.load(str(work / f"{name}.onnx"))
        specs, _ = specs_from_onnx(model)
        by_name = {i["name"]: i for i in metadata.get("inputs", [])}
        for spec in specs:  # token ids within the vocabulary, masks of ones
            spec.low, spec.high = by_name.get(spec.name, {}).get("low"), by_name.get(spec.name, {}).get("high")
        feeds = generate_inputs(specs, run=0)
        session = ort.InferenceSession(str(work / f"{name}.onnx"), providers=["CPUExecutionProvider"])
        native = native_runner(path, [s.name for s in specs])
        native_ms = median_ms(native, feeds, args.runs)
        ort_ms = median_ms(lambda f, s=session: s.run(None, f), feeds, args.runs)
        diff = report["verification"]["max_abs_diff"]
        print(f"{name:22s} {convert_s:9.1f} {native_ms:10.3f} {ort_ms:10.3f} {native_ms / ort_ms:9.1f}x {diff:12.2e}")



if __name__ == "__main__":
    main()
