"""Fine-tuning: time per epoch through the hub next to the same training loop run directly.

    .venv/bin/python bench/finetune.py [--rows 20000] [--epochs 8] [--runs 2]

Starts the embedded hub (``manage.py hub_serve``: SQLite, its Celery worker, files in a scratch folder),
publishes an MLP (4-64-64-3, TorchScript) and a CSV of ``--rows`` rows, and fine-tunes it through the API
(``modelAPI.finetune``). An epoch's time through the hub is the gap between consecutive epoch lines of the
job's log (training and evaluation inside the sandbox, the line's trip to the worker and into the database);
directly, it is the same gap between the same lines from ``hpcfair.finetune.run.finetune`` called in this
process, with as many threads as the sandbox gets; and the job's sandboxed child alone (``sandbox.run``, no
hub around it). Runs alternate (hub, sandbox, direct, hub, ...), each once
the hub is idle (a fine-tune's result is converted to ONNX right after it: not beside the direct loop).
The job's fixed costs (sandbox start, imports, publishing) are reported beside the epochs, not in them.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

import numpy as np  # noqa: E402

from tests.ports import free_port  # noqa: E402


def make_inputs(folder: Path, rows: int) -> tuple[Path, Path]:
    import torch

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, rows)
    x = np.eye(3, 4)[y] * 2 + rng.normal(0, 0.8, (rows, 4))
    data = folder / "data"
    data.mkdir()
    lines = ["a,b,c,d,label"] + [",".join(f"{v:.4f}" for v in r) + f",{label}" for r, label in zip(x, y, strict=True)]
    (data / "blobs.csv").write_text("\n".join(lines) + "\n")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 3))
    torch.jit.save(torch.jit.script(model), str(folder / "mlp.pt"))
    return folder / "mlp.pt", data / "blobs.csv"


def epoch_gaps(stamps: list[tuple[float, str]]) -> list[float]:
    """Seconds between the line before epoch 1 ("base model ...") and each epoch line, epoch by epoch."""
    marks = [t for t, line in stamps if line.startswith(("base model", "epoch "))]
    return [b - a for a, b in zip(marks, marks[1:], strict=False)]


def hub_run(api, epochs: int, seed: int) -> dict:
    cfg = {"general_args": {"task": "finetune"}, "device_args": {"device": "cpu"},
           "model_args": {"model_file": ["demo/bench-mlp@1"], "model_name": f"bench-tuned-{seed}"},
           "task_args": {"dataset": "demo/bench-blobs@1", "target": "label", "epochs": epochs, "learning_rate": 0.005,
                         "batch_size": 64, "seed": seed}}
    started = time.monotonic()
    result = api.finetune(cfg)
    wall = time.monotonic() - started
    job = api.client.job(result["job"])
    stamps = [(datetime.fromisoformat(line["time"]).timestamp(), line["message"]) for line in job["log"]]
    history = api.client.resolve(result["pid"])["metadata"]["training"]["history"]
    return {"epochs": epoch_gaps(stamps), "fit": [r["seconds"] for r in history], "job_s": job["duration"],
            "wall_s": wall}


def direct_run(model: Path, data: Path, epochs: int, seed: int, threads: int) -> dict:
    import torch
    from hpcfair.finetune.run import finetune
    from hpcfair.finetune.spec import Hyper

    torch.set_num_threads(threads)
    stamps: list[tuple[float, str]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        report = finetune(model, data.parent, Path(out), Hyper.from_dict({"target": "label", "epochs": epochs,
                                                                   "learning_rate": 0.005, "batch_size": 64,
                                                                   "seed": seed}),
                 stage=lambda fraction, line: stamps.append((time.time(), line)))
    return {"epochs": epoch_gaps(stamps), "fit": [r["seconds"] for r in report["history"]],
            "wall_s": time.monotonic() - started}


def wait_idle(api) -> None:
    while any(j["state"] in ("queued", "running") for j in api.client.jobs()):
        time.sleep(1)


def sandbox_run(model: Path, data: Path, epochs: int, seed: int, threads: int) -> dict:
    """The job's child without the hub: ``hpcfair.convert.sandbox.run`` on the same request, in this process."""
    from hpcfair.convert import Limits, sandbox

    stamps: list[tuple[float, str]] = []
    work = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    try:
        shutil.copyfile(model, work / model.name)
        shutil.copytree(data.parent, work / "dataset")
        started = time.monotonic()
        report = sandbox.run({"task": "finetune", "model": model.name, "dataset": "dataset", "output": "out",
                              "hyper": {"target": "label", "epochs": epochs, "learning_rate": 0.005, "batch_size": 64,
                                        "seed": seed}}, work, Limits(threads=threads),
                             on_line=lambda line: stamps.append((time.time(), line.split("] ", 1)[-1])))
        return {"epochs": epoch_gaps(stamps), "fit": [r["seconds"] for r in report["history"]],
                "wall_s": time.monotonic() - started}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    from hpcfair import modelAPI

    loads = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-finetune-"))
    model, csv = make_inputs(work, args.rows)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env.update(HUB_VAR_DIR=str(work / "var"), HUB_PUBLIC_URL=f"http://127.0.0.1:{port}", HUB_CUBE_ON_CONVERT="off",
               PYTHONPATH=f"{ROOT}:{ROOT / 'client'}")
    log = open(work / "serve.log", "w")  # noqa: SIM115
    server = subprocess.Popen([sys.executable, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{port}"], cwd=ROOT,
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, (work / "serve.log").read_text()[-2000:]
                time.sleep(0.5)
        token = subprocess.run([sys.executable, "manage.py", "hub_token", "demo", "--scope", "write"], cwd=ROOT,
                               env=env, capture_output=True, text=True, check=True).stdout.strip()
        api = modelAPI(f"http://127.0.0.1:{port}", token)
        meta = {"title": "bench", "description": "bench", "creators": [{"name": "bench"}], "license": "MIT"}
        api.client.publish("bench-mlp", {"mlp.pt": model}, {**meta, "framework": "pytorch", "task": "classification",
                                                            "inputs": [{"name": "x", "shape": [None, 4]}]})
        api.client.publish("bench-blobs", {"blobs.csv": csv}, meta, kind="dataset")
        wait_idle(api)  # the demo's and the bench's own conversions
        threads = int(os.environ.get("HUB_CONVERT_THREADS", "2"))
        hub, alone, direct = [], [], []
        for run in range(args.runs):
            hub.append(hub_run(api, args.epochs, run))
            wait_idle(api)  # the result's automatic conversion must not run beside the other loops
            alone.append(sandbox_run(model, csv, args.epochs, run, threads))
            direct.append(direct_run(model, csv, args.epochs, run, threads))
            print(f"run {run + 1} (load {os.getloadavg()[0]:.1f}): hub {[round(e, 3) for e in hub[-1]['epochs']]}, "
                  f"sandbox {[round(e, 3) for e in alone[-1]['epochs']]}, "
                  f"direct {[round(e, 3) for e in direct[-1]['epochs']]}", flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nmachine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.rows} rows, {args.epochs} epochs x {args.runs} runs, batch 64, {threads} threads; load average "
          f"{loads[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("| path | what | median s | mean s | min s | max s |")
    print("|---|---|---:|---:|---:|---:|")
    medians = {}
    for key, what in (("epochs", "epoch (log line to log line)"), ("fit", "training pass alone")):
        for name, runs in (("hub (sandboxed job)", hub), ("sandbox alone (no hub)", alone),
                           ("direct (same loop)", direct)):
            values = [v for r in runs for v in r[key]]
            medians[key, name[:3]] = statistics.median(values)
            print(f"| {name} | {what} | {statistics.median(values):.3f} | {statistics.mean(values):.3f} | "
                  f"{min(values):.3f} | {max(values):.3f} |")
    for key in ("epochs", "fit"):
        print(f"{key} (median) against direct: hub {100 * (medians[key, 'hub'] / medians[key, 'dir'] - 1):+.1f} %, "
              f"sandbox alone {100 * (medians[key, 'san'] / medians[key, 'dir'] - 1):+.1f} %")
    job_s, hub_wall = statistics.mean(r["job_s"] for r in hub), statistics.mean(r["wall_s"] for r in hub)
    print(f"job duration (claim to publish) {job_s:.1f} s, request to result {hub_wall:.1f} s; sandbox alone "
          f"{statistics.mean(r['wall_s'] for r in alone):.1f} s; direct call "
          f"{statistics.mean(r['wall_s'] for r in direct):.1f} s")


if __name__ == "__main__":
    main()
