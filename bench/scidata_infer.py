"""A batch inference over a 1 GiB NetCDF variable, against ONNX Runtime over the same array in memory.

    .venv/bin/python bench/scidata_infer.py [--rows 262144] [--features 1024] [--repeats 3]

Writes a NetCDF4 file (``netCDF4``) holding one float32 variable ``/x`` of ``--rows`` x ``--features``
(1 GiB by default; chunked by 4,096 rows, uncompressed) and a 1024->16 linear ONNX model (``onnx.helper``),
then times, interleaved ``--repeats`` times (median):

- the floor: bare ``InferenceSession.run`` (one thread, as the worker's default ``HUB_INFER_THREADS``) over
  the array already in memory, in batches of the rows the hub fits to ``HUB_INFER_BATCH_MB``;
- the hub: what ``InferJob.run`` does for ``inputs: data.nc:/x`` after the file is placed, in process:
  ``scientific.read_unit`` (the sandboxed child reads the variable and writes ``inputs.npy``),
  ``load_sample_inputs`` + ``check`` + ``mapped_source``, and ``run_batches`` through the worker's engine
  child (which maps the ``.npy`` and runs the batches). The job record is a stand-in (``Ctx``: no database;
  logs and progress dropped), the only part not run;
- alone, for the record of where the time goes: a copy of the file and ``read_variable`` in process (what
  no reader of the file avoids, with no sandbox and no model).

Prints rows/s, the ratio (issue 58's target: >= 0.75), each phase of the hub's path and the machine's load.
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))
CHUNK_ROWS = 4096


def write_inputs(folder: Path, rows: int, features: int) -> np.ndarray:
    """``data.nc`` with ``/x`` and ``model.onnx`` (input [N, features] -> y [N, 16]); the array, for the floor."""
    import netCDF4
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(58)
    array = rng.standard_normal((rows, features), dtype=np.float32)
    with netCDF4.Dataset(folder / "data.nc", "w", format="NETCDF4") as nc:
        nc.createDimension("row", rows)
        nc.createDimension("feature", features)
        var = nc.createVariable("x", "f4", ("row", "feature"), chunksizes=(CHUNK_ROWS, features))
        for start in range(0, rows, CHUNK_ROWS * 16):
            var[start:start + CHUNK_ROWS * 16] = array[start:start + CHUNK_ROWS * 16]
    weights = numpy_helper.from_array(rng.standard_normal((features, 16), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["input", "w"], ["y"])], "linear",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])], [weights])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              folder / "model.onnx")
    return array


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


def bounds_of_the_read(folder: Path, array: np.ndarray) -> dict[str, float]:
    """What no reader of the file avoids, in process and unbounded: copying the file once (the sandbox reads
    its own copy) and ``read_variable`` into memory (netCDF4/HDF5 from the page cache)."""
    from hpcfair.scidata import read_variable

    started = time.perf_counter()
    shutil.copyfile(folder / "data.nc", folder / "copy.nc")
    copied = time.perf_counter() - started
    (folder / "copy.nc").unlink()
    started = time.perf_counter()
    read = read_variable(folder / "data.nc", "/x")
    elapsed = time.perf_counter() - started
    assert np.array_equal(read[-1], array[-1])
    return {"copy": copied, "read_variable": elapsed}


def hub_path(folder: Path, rows: int) -> dict[str, float]:
    """Seconds of each phase of the job's path over ``data.nc:/x``; the outputs checked for their rows."""
    from django.conf import settings
    from hpcfair.convert.signature import load_sample_inputs

    from hub.gateway.jobs.infer import mapped_source, run_batches
    from hub.gateway.tensors import check
    from hub.metadata import scientific

    work = Path(tempfile.mkdtemp(prefix="job-", dir=folder))
    step = {"local": str(folder / "model.onnx")}
    ctx = SimpleNamespace(job=SimpleNamespace(params={}, device="cpu"), log=lambda *a: None,
                          progress=lambda *a: None)
    times: dict[str, float] = {}
    started = time.perf_counter()
    scientific.read_unit("data.nc", [("data.nc", folder / "data.nc")], extract="/x", dest=work / "inputs.npy")
    times["read (sandbox)"] = time.perf_counter() - started
    mark = time.perf_counter()
    arrays = check(load_sample_inputs(work / "inputs.npy", None, settings.HUB_ARCHIVE_INFLATE_MAX_BYTES, mapped=True),
                   None)
    source = mapped_source(work / "inputs.npy", arrays)
    times["load"] = time.perf_counter() - mark
    mark = time.perf_counter()
    session = {"inputs": [["input", ["N", arrays["input"].shape[1]], "float32"]]}
    out = run_batches(ctx, session, arrays, 0, None, [step], source)
    times["run"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - started
    assert out["y"].shape[0] == rows, out["y"].shape
    shutil.rmtree(work)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2**18)
    parser.add_argument("--features", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
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

    array = write_inputs(scratch, args.rows, args.features)
    batch = rows_per_batch({"x": array}, 0, settings.HUB_INFER_BATCH_BYTES)
    size = (scratch / "data.nc").stat().st_size
    print(f"data.nc: {args.rows} x {args.features} float32, {size / 2**30:.2f} GiB, chunks of {CHUNK_ROWS} rows; "
          f"batches of {batch} rows; load {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    floors, hubs, bounds = [], [], []
    for repeat in range(args.repeats):
        floors.append(floor(scratch / "model.onnx", array, batch))
        hubs.append(hub_path(scratch, args.rows))
        bounds.append(bounds_of_the_read(scratch, array))
        phases = ", ".join(f"{k} {v:.2f} s" for k, v in hubs[-1].items())
        alone = ", ".join(f"{k} {v:.2f} s" for k, v in bounds[-1].items())
        print(f"  repeat {repeat + 1}: floor {floors[-1]:.2f} s; hub {phases}; alone: {alone}; "
              f"load {os.getloadavg()[0]:.1f}")
    best_floor = args.rows / statistics.median(floors)
    best_hub = args.rows / statistics.median(h["total"] for h in hubs)
    ratio = best_hub / best_floor
    print(f"floor (ONNX Runtime, array in memory): {best_floor:,.0f} rows/s")
    print(f"hub (data.nc:/x, read + load + run):   {best_hub:,.0f} rows/s")
    read_alone = args.rows / statistics.median(b["read_variable"] for b in bounds)
    print(f"read_variable alone (no sandbox, no copy, no model): {read_alone:,.0f} rows/s, "
          f"{read_alone / best_floor:.2f} of the floor")
    print(f"ratio {ratio:.2f} (target >= 0.75): {'ok' if ratio >= 0.75 else 'UNDER'}; "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
