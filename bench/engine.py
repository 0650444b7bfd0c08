"""What running uploaded graphs in an engine process (hub.gateway.engine) costs a worker, per request.

    .venv/bin/python bench/engine.py [--runs 2000]

For the gateway's 784-256-10 MLP and small CNN (tests/gateway/models.py), one row, interleaved in blocks of
100 calls so that drift hits every series alike, in one run:

- ``bare``: ``session.run`` of ONNX Runtime in this process (the floor);
- ``in-process``: ``hub.gateway.sessions.run_steps`` in this process, as the worker's lane threads ran before;
- ``engine``: ``hub.gateway.engine.run_steps``, the same call through the engine process (wire-packed over a
  socket pair, a capped arena given back after each run).

It prints p50/p95 in microseconds and the engine's cost over the in-process path; nothing else is started.
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
from bench.infer import percentile  # noqa: E402 - after the path is set

FOLDER = Path(tempfile.mkdtemp(prefix="hub-bench-engine-"))
os.environ.update({"HUB_STORAGE": "filesystem", "HUB_STORAGE_DIR": str(FOLDER / "blobs"),
                   "HUB_VAR_DIR": str(FOLDER / "var")})  # the engine reads the models from this store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()

    import hashlib

    import django

    django.setup()
    import onnxruntime as ort
    from hpcfair.compute import runs

    from hub.gateway import engine, sessions
    from hub.storage import get_blob_store
    from tests.gateway import models

    print(f"# bench/engine.py {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({os.cpu_count()} cores), "
          f"{args.runs} calls per series in blocks of 100; load {os.getloadavg()}")
    print("| model | bare p50 µs | in-process p50 µs | engine p50 µs | bare p95 | in-process p95 | engine p95 | "
          "engine − in-process (p50) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, data, shape, input_name in (("mlp", models.mlp(), (1, 784), "x"),
                                          ("cnn", models.cnn(), (1, 1, 28, 28), "image")):
        path = FOLDER / f"{name}.onnx"
        path.write_bytes(data)
        sha256 = hashlib.sha256(data).hexdigest()
        get_blob_store().put_file(path, sha256)
        feeds = {input_name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
        bare = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        step = [{"sha256": sha256, "size": len(data)}]
        cached = sessions.cache().get(step[0], "cpu", 1)  # the in-process path's cached session
        series: dict[str, list[float]] = {"bare": [], "in-process": [], "engine": []}

        calls = {
            "bare": lambda bare=bare, feeds=feeds: bare.run(None, feeds),
            "in-process": lambda cached=cached, feeds=feeds: runs.run_model(cached, feeds, time.time() + 10),
            "engine": lambda step=step, feeds=feeds: engine.run_steps(step, feeds, device="cpu", threads=1,
                                                                       deadline=time.time() + 10),
        }
        for call in calls.values():
            for _ in range(50):
                call()  # warm: sessions loaded, the engine started
        for _ in range(max(args.runs // 100, 1)):
            for label, call in calls.items():
                for _ in range(100):
                    started = time.perf_counter()
                    call()
                    series[label].append((time.perf_counter() - started) * 1e6)
        p50 = {label: statistics.median(values) for label, values in series.items()}
        p95 = {label: percentile(values, 0.95) for label, values in series.items()}
        print(f"| {name} | " + " | ".join(f"{p50[k]:.0f}" for k in series) + " | "
              + " | ".join(f"{p95[k]:.0f}" for k in series) + f" | {p50['engine'] - p50['in-process']:+.0f} µs |",
              flush=True)
    engine.engine().close()
    print(f"# load at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
