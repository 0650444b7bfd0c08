"""The Redis lane's round trip, this tree against another one: lane and engine only, no HTTP.

    .venv/bin/python bench/redis_lane.py /tmp/hub-before [--runs 2000]

One lane engine of each tree (``hub.gateway.engine``, as a worker's lane thread keeps it), each on its own
Redis database of the test services (scripts/services.sh); this process sends the gateway's MLP one row
through each tree's ``RedisLane.call`` (each tree's lane module runs in a child process of its own),
alternating blocks of 100 (``AB_ORDER=after-first``: this tree's first in each round), and prints p50/p95
of the round trip and the engine's ``serve_ms``/``run_ms``.
The lane's hot path is what issue 39 trimmed; HTTP and the web side are the same in both.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.infer import percentile, services_env  # noqa: E402 - after the path is set

# Run in each tree: an engine on the lane, then, for each line "N" read from stdin, N calls timed.
CALLER = r"""
import hashlib, json, os, subprocess, sys, time
from pathlib import Path
import django
django.setup()
from hub.gateway import wire
from hub.gateway.engine import Engine
from hub.gateway.lane import get_lane
from hub.storage import get_blob_store
import numpy as np
from tests.gateway import models
engine = Engine(lane="cpu")
engine.start()
data = models.mlp()
folder = Path(os.environ["HUB_STORAGE_DIR"])
folder.mkdir(parents=True, exist_ok=True)
(folder / "mlp.onnx").write_bytes(data)
sha256 = hashlib.sha256(data).hexdigest()
get_blob_store().put_file(folder / "mlp.onnx", sha256)
lane = get_lane()
lane.announce("cpu", "bench")
x = np.random.default_rng(0).standard_normal((1, 784)).astype(np.float32)
print("ready", flush=True)
for line in sys.stdin:
    lane.announce("cpu", "bench")  # as a worker does every 2 s: seen alive for 6 s
    times, serve, run = [], [], []
    for _ in range(int(line)):
        message = wire.pack({"steps": [{"sha256": sha256, "size": len(data)}], "threads": 1, "outputs": None,
                             "deadline": time.time() + 10}, {"x": x})
        started = time.perf_counter()
        answer = lane.call("cpu", message, 10)
        times.append((time.perf_counter() - started) * 1e3)
        meta, _ = wire.unpack(answer)
        assert meta["ok"], meta
        serve.append(meta["serve_ms"])
        run.append(meta["run_ms"])
    print(json.dumps([times, serve, run]), flush=True)
engine.stop()
"""


def main() -> None:
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the other tree")
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    env = services_env()
    redis_base = env["HUB_BROKER_URL"].rsplit("/", 1)[0]
    work = Path(tempfile.mkdtemp(prefix="hub-bench-redis-lane-"))
    callers = {}
    trees = [("before", args.before.resolve(), 11), ("after", ROOT, 12)]
    for label, tree, db in trees[::-1] if os.environ.get("AB_ORDER") == "after-first" else trees:
        url = f"{redis_base}/{db}"
        callers[label] = subprocess.Popen(
            [sys.executable, "-c", CALLER], cwd=tree, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**env, "PYTHONPATH": f"{tree}:{tree / 'client'}", "DJANGO_SETTINGS_MODULE": "hub.settings",
                 "HUB_STORAGE": "filesystem", "HUB_STORAGE_DIR": str(work / label / "blobs"),
                 "HUB_VAR_DIR": str(work / label / "var"), "HUB_BROKER_URL": url, "HUB_GATEWAY_URL": url})
    series: dict[str, list[list[float]]] = {label: [[], [], []] for label in callers}
    try:
        for caller in callers.values():
            assert caller.stdout.readline().strip() == "ready"

        def block(label: str, count: int) -> list[list[float]]:
            callers[label].stdin.write(f"{count}\n")
            callers[label].stdin.flush()
            return json.loads(callers[label].stdout.readline())

        for label in callers:
            block(label, 200)  # warm up
        start_load = os.getloadavg()
        for _ in range(max(args.runs // 100, 1)):
            for label in callers:
                for collected, new in zip(series[label], block(label, 100), strict=True):
                    collected.extend(new)
        print(f"# bench/redis_lane.py {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({os.cpu_count()} "
              f"cores): before {args.before}, after {ROOT}; {args.runs} calls per tree in alternating blocks of "
              f"100, {next(iter(callers))} first; MLP, one row; load at the start {start_load[0]:.2f}, at the end "
              f"{os.getloadavg()[0]:.2f}")
        print("| tree | lane.call p50 ms | p95 ms | engine serve_ms p50 | run_ms p50 |")
        print("|---|---|---|---|---|")
        for label, (times, serve, run) in series.items():
            print(f"| {label} | {statistics.median(times):.3f} | {percentile(times, .95):.3f} | "
                  f"{statistics.median(serve):.3f} | {statistics.median(run):.3f} |")
        ratio = statistics.median(series["after"][0]) / statistics.median(series["before"][0])
        print(f"# after / before p50: {ratio:.2f}")
    finally:
        for caller in callers.values():
            caller.stdin.close()
            try:
                caller.wait(timeout=20)
            except subprocess.TimeoutExpired:
                caller.kill()


if __name__ == "__main__":
    main()
