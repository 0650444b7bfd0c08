"""The embedded default's lane (files under var/gateway): waking on inotify against looking every 2 ms.

    .venv/bin/python bench/file_lane.py [--runs 1000] [--idle 10]

Two lane engines (hub.gateway.engine, as a worker's lane thread keeps them) on two file lanes in scratch
folders, one with ``HUB_FILE_LANE_WAKE=1`` (inotify) and one with ``0`` (the 2 ms poll); this process sends
the gateway's MLP one row through each lane's ``call``, alternating blocks of 100, and prints p50/p95 of the
round trip (lane and run, no HTTP) and the engines' CPU while idle for ``--idle`` seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))
FOLDER = Path(tempfile.mkdtemp(prefix="hub-bench-file-lane-"))
os.environ.update({"DJANGO_SETTINGS_MODULE": "hub.settings", "HUB_STORAGE": "filesystem",
                   "HUB_STORAGE_DIR": str(FOLDER / "blobs"), "HUB_BROKER_URL": "filesystem://"})
os.environ.pop("HUB_GATEWAY_URL", None)
from bench.infer import percentile  # noqa: E402 - after the path is set


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=10.0)
    args = parser.parse_args()
    lanes = {"wake": FOLDER / "wake", "poll": FOLDER / "poll"}
    children = {}
    for label, var in lanes.items():  # each engine reads its lane's settings from its environment
        os.environ.update({"HUB_VAR_DIR": str(var), "HUB_FILE_LANE_WAKE": "1" if label == "wake" else "0"})
        children[label] = subprocess.Popen(
            [sys.executable, "-c", "import django; django.setup(); from hub.gateway.engine import Engine; "
             "import time; e = Engine(lane='cpu'); e.start(); print(e.pid, flush=True); time.sleep(10**6)"],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    engines = {label: int(child.stdout.readline()) for label, child in children.items()}
    import django

    django.setup()
    from hub.gateway import wire
    from hub.gateway.lane import FileLane
    from hub.storage import get_blob_store
    from tests.gateway import models

    data = models.mlp()
    (FOLDER / "mlp.onnx").write_bytes(data)
    sha256 = hashlib.sha256(data).hexdigest()
    get_blob_store().put_file(FOLDER / "mlp.onnx", sha256)
    callers = {label: FileLane(var / "gateway", wake=label == "wake") for label, var in lanes.items()}
    for label, lane in callers.items():
        lane.announce("cpu", f"bench-{label}")
    x = np.random.default_rng(0).standard_normal((1, 784)).astype(np.float32)

    def message() -> bytes:
        return wire.pack({"steps": [{"sha256": sha256, "size": len(data)}], "threads": 1, "outputs": None,
                          "deadline": time.time() + 10}, {"x": x})

    series: dict[str, list[float]] = {label: [] for label in callers}
    for lane in callers.values():
        for _ in range(50):
            assert wire.unpack(lane.call("cpu", message(), 10))[0]["ok"]
    for _ in range(max(args.runs // 100, 1)):
        for label, lane in callers.items():
            for _ in range(100):
                started = time.perf_counter()
                answer = lane.call("cpu", message(), 10)
                series[label].append((time.perf_counter() - started) * 1e3)
                assert answer is not None and wire.unpack(answer)[0]["ok"]
    before = {label: cpu_seconds(pid) for label, pid in engines.items()}
    time.sleep(args.idle)
    idle = {label: 100 * (cpu_seconds(pid) - before[label]) / args.idle for label, pid in engines.items()}
    print(f"# bench/file_lane.py {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({os.cpu_count()} cores), "
          f"{args.runs} calls per lane in alternating blocks of 100; MLP, one row; load {os.getloadavg()}")
    print("| lane | p50 ms | p95 ms | engine CPU while idle |")
    print("|---|---|---|---|")
    for label in callers:
        print(f"| {label} | {statistics.median(series[label]):.3f} | {percentile(series[label], .95):.3f} | "
              f"{idle[label]:.2f} % of a core |")
    print(f"# poll / wake p50: {statistics.median(series['poll']) / statistics.median(series['wake']):.2f}x")
    for child in children.values():
        child.kill()
        child.wait()


if __name__ == "__main__":
    main()
