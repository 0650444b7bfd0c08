"""A batch inference over a 1 GiB NetCDF variable, against ONNX Runtime over the same array in memory.

    .venv/bin/python bench/scidata_infer.py [--rows 262144] [--features 1024] [--repeats 3]
                                            [--codecs none,zlib] [--models tiny,mlp]

Writes NetCDF4 files (``netCDF4``) holding one float32 variable ``/x`` of ``--rows`` x ``--features``
(1 GiB by default; chunked by 4,096 rows), uncompressed (``none``) and deflated (``zlib``, level 1), and
two ONNX models (``onnx.helper``): ``tiny``, one 1024->16 MatMul (cheaper per row than touching its bytes:
it measures the reader alone), and ``mlp``, a 1024->256->256->16 ReLU perceptron (332k parameters, an
emulator's size: 0.66 MFLOP a row). For each model and file it times, interleaved ``--repeats`` times (median):

- the floor: bare ``InferenceSession.run`` (one thread, as the worker's default ``HUB_INFER_THREADS``) over
  the array already in memory, in batches of the rows the hub fits to ``HUB_INFER_BATCH_MB``;
- the hub, streamed: what ``InferJob.run`` does for ``inputs: data.nc:/x`` after the file is placed, in
  process: ``scientific.VariableStream`` (the sandboxed child, reading the file where it lies, finds the
  variable stored as one run of bytes and says where, so the engine maps the file itself (``none``); or it
  reads the variable slab by slab into a mapped ``inputs.npy``, announcing each slab (``zlib``)),
  ``read_inputs``, and ``run_batches`` through the worker's engine child, each batch run once its rows are
  there. The job record is a stand-in (``Ctx``: no database; logs and progress dropped), the only part not run;
- the hub, whole first (the path before streaming, the baseline): the variable copied into ``inputs.npy``
  whole before the run starts.

Prints rows/s, the ratios against the floor (issue 58's target: >= 0.75), the phases and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))
CHUNK_ROWS = 4096


def write_inputs(folder: Path, rows: int, features: int, codecs: list[str]) -> np.ndarray:
    """``data-<codec>.nc`` with ``/x``, ``tiny.onnx`` and ``mlp.onnx`` (input [N, features] -> y [N, 16]); the
    array, for the floor."""
    import netCDF4

    rng = np.random.default_rng(58)
    array = rng.standard_normal((rows, features), dtype=np.float32)
    for codec in codecs:
        with netCDF4.Dataset(folder / f"data-{codec}.nc", "w", format="NETCDF4") as nc:
            nc.createDimension("row", rows)
            nc.createDimension("feature", features)
            var = nc.createVariable("x", "f4", ("row", "feature"), chunksizes=(CHUNK_ROWS, features),
                                    zlib=codec == "zlib", complevel=1)
            for start in range(0, rows, CHUNK_ROWS * 16):
                var[start:start + CHUNK_ROWS * 16] = array[start:start + CHUNK_ROWS * 16]
    save_model(folder / "tiny.onnx", [features, 16], rng)
    save_model(folder / "mlp.onnx", [features, 256, 256, 16], rng)
    return array


def save_model(path: Path, sizes: list[int], rng: np.random.Generator) -> None:
    """A perceptron of ``sizes`` (one MatMul when two sizes; Gemm + ReLU layers otherwise), named input -> y."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, weights, last = [], [], "input"
    for index, (inner, outer) in enumerate(zip(sizes, sizes[1:], strict=False)):
        w = numpy_helper.from_array((rng.standard_normal((inner, outer)) / np.sqrt(inner)).astype(np.float32),
                                    f"w{index}")
        weights.append(w)
        out = "y" if index == len(sizes) - 2 else f"h{index}"
        if len(sizes) == 2:
            nodes.append(helper.make_node("MatMul", [last, w.name], [out]))
        else:
            b = numpy_helper.from_array(np.zeros(outer, np.float32), f"b{index}")
            weights.append(b)
            nodes.append(helper.make_node("Gemm", [last, w.name, b.name], [out if out == "y" else out + "_pre"]))
            if out != "y":
                nodes.append(helper.make_node("Relu", [out + "_pre"], [out]))
        last = out
    graph = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                              ["N", sizes[0]])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", sizes[-1]])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def floor(model: Path, array: np.ndarray, batch: int) -> float:
    """Seconds for bare ONNX Runtime over ``array`` in memory."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    started = time.perf_counter()
    parts = [session.run(None, {"input": array[i:i + batch]})[0] for i in range(0, len(array), batch)]
    elapsed = time.perf_counter() - started
    assert sum(len(p) for p in parts) == len(array)
    return elapsed


def hub_path(folder: Path, data: Path, model: Path, rows: int, streamed: bool) -> dict[str, Any]:
    """Seconds of each phase of the job's path over ``data:/x`` and how the values reached the engine
    (``how``); the outputs checked for their rows."""
    from hub.gateway.jobs.infer import read_inputs, run_batches
    from hub.metadata import scientific

    work = Path(tempfile.mkdtemp(prefix="job-", dir=folder))
    step = {"local": str(model)}
    ctx = SimpleNamespace(job=SimpleNamespace(params={}, device="cpu"), log=lambda *a: None,
                          progress=lambda *a: None)
    times: dict[str, Any] = {}
    started = time.perf_counter()
    stream = scientific.VariableStream("data.nc", [("data.nc", data)], "/x", work / "inputs.npy",
                                       in_place=streamed).start()
    times["first rows"] = time.perf_counter() - started
    if not streamed:
        stream.wait(sys.maxsize)
        times["read"] = time.perf_counter() - started
    arrays, source, ready = read_inputs(work / "inputs.npy", stream, None)
    assert source is not None
    how = "mapped where it lies" if "extent" in source else "copied into inputs.npy"
    mark = time.perf_counter()
    session = {"inputs": [["input", ["N", arrays["input"].shape[1]], "float32"]]}
    out = run_batches(ctx, session, arrays, 0, None, [step], source, ready if streamed else None)
    times["run"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - started
    times["how"] = how
    assert out["y"].shape[0] == rows, out["y"].shape
    stream.wait(sys.maxsize)  # the child's folder removed before the next
    shutil.rmtree(work)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2**18)
    parser.add_argument("--features", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--codecs", default="none,zlib")
    parser.add_argument("--models", default="tiny,mlp")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-scidata-"))
    os.environ.setdefault("HUB_VAR_DIR", str(scratch / "var"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    import django

    django.setup()
    try:
        measure(scratch, args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(scratch: Path, args: argparse.Namespace) -> None:
    from django.conf import settings
    from hpcfair.compute.runs import rows_per_batch

    codecs, models = args.codecs.split(","), args.models.split(",")
    array = write_inputs(scratch, args.rows, args.features, codecs)
    batch = rows_per_batch({"x": array}, 0, settings.HUB_INFER_BATCH_BYTES)
    sizes = ", ".join(f"{c} {(scratch / f'data-{c}.nc').stat().st_size / 2**30:.2f} GiB" for c in codecs)
    print(f"data-*.nc: {args.rows} x {args.features} float32 ({sizes}), chunks of {CHUNK_ROWS} rows; batches of "
          f"{batch} rows; load {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    for name in models:
        model = scratch / f"{name}.onnx"
        for codec in codecs:
            data = scratch / f"data-{codec}.nc"
            floors, streamed, whole = [], [], []
            for repeat in range(args.repeats):
                floors.append(floor(model, array, batch))
                streamed.append(hub_path(scratch, data, model, args.rows, True))
                whole.append(hub_path(scratch, data, model, args.rows, False))
                line = lambda t: ", ".join(v if k == "how" else f"{k} {v:.2f} s" for k, v in t.items())  # noqa: E731
                print(f"  {name} {codec} repeat {repeat + 1}: floor {floors[-1]:.2f} s; "
                      f"streamed: {line(streamed[-1])}; "
                      f"whole first: {line(whole[-1])}; load {os.getloadavg()[0]:.1f}")
            best = args.rows / statistics.median(floors)
            hub = args.rows / statistics.median(t["total"] for t in streamed)
            before = args.rows / statistics.median(t["total"] for t in whole)
            print(f"{name} {codec}: floor {best:,.0f} rows/s; streamed {hub:,.0f} rows/s, ratio {hub / best:.2f} "
                  f"({'ok' if hub / best >= 0.75 else 'UNDER'} against 0.75); whole first {before:,.0f} rows/s, "
                  f"ratio {before / best:.2f}; streamed/whole {hub / before:.2f}; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
