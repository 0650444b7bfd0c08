"""Fine-tuning: time per epoch through the hub next to the same training loop run directly.

    .venv/bin/python bench/finetune.py [--rows 20000] [--epochs 8] [--runs 2]

Starts the embedded hub (``manage.py hub_serve``: SQLite, its Celery worker, files in a scratch folder),
publishes an MLP (4-64-64-3, TorchScript) and a CSV of ``--rows`` rows, and fine-tunes it through the API
(``modelAPI.finetune``). An epoch's time through the hub is the gap between consecutive epoch lines of the
job's log (training and evaluation inside the sandbox, the line's trip to the worker and into the database);
directly, it is the same gap between the same lines from ``hpcfair.finetune.run.finetune`` called in this
process, with as many threads as the sandbox gets. Runs alternate (hub, direct, hub, direct, ...).
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    return {"epochs": epoch_gaps(stamps), "job_s": job["duration"], "wall_s": wall}


def direct_run(model: Path, data: Path, epochs: int, seed: int, threads: int) -> dict:
    import torch
    from hpcfair.finetune.run import finetune
    from hpcfair.finetune.spec import Hyper

    torch.set_num_threads(threads)
    stamps: list[tuple[float, str]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        finetune(model, data.parent, Path(out), Hyper.from_dict({"target": "label", "epochs": epochs,
                                                                   "learning_rate": 0.005, "batch_size": 64,
                                                                   "seed": seed}),
                 stage=lambda fraction, line: stamps.append((time.time(), line)))
    return {"epochs": epoch_gaps(stamps), "wall_s": time.monotonic() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    from hpcfair import modelAPI

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
        while any(j["state"] in ("queued", "running") for j in api.client.jobs()):  # demo and bench conversions
            time.sleep(1)
        threads = int(os.environ.get("HUB_CONVERT_THREADS", "2"))
        hub, direct = [], []
        for run in range(args.runs):
            hub.append(hub_run(api, args.epochs, run))
            direct.append(direct_run(model, csv, args.epochs, run, threads))
            print(f"run {run + 1}: hub epochs {[round(e, 3) for e in hub[-1]['epochs']]}, "
                  f"direct {[round(e, 3) for e in direct[-1]['epochs']]}", flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    hub_epochs = [e for r in hub for e in r["epochs"]]
    direct_epochs = [e for r in direct for e in r["epochs"]]
    h, d = statistics.median(hub_epochs), statistics.median(direct_epochs)
    print(f"\nmachine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.rows} rows, {args.epochs} epochs x {args.runs} runs, batch 64, {threads} threads")
    print("| path | median s/epoch | mean s/epoch | min | max |")
    print("|---|---:|---:|---:|---:|")
    for name, values in (("hub (sandboxed job)", hub_epochs), ("direct (same loop, this process)", direct_epochs)):
        print(f"| {name} | {statistics.median(values):.3f} | {statistics.mean(values):.3f} | {min(values):.3f} | "
              f"{max(values):.3f} |")
    print(f"\nhub overhead per epoch (median): {100 * (h / d - 1):+.1f} %")
    job_s, hub_wall = statistics.mean(r["job_s"] for r in hub), statistics.mean(r["wall_s"] for r in hub)
    print(f"job duration (claim to publish) {job_s:.1f} s, request to result {hub_wall:.1f} s; direct call "
          f"{statistics.mean(r['wall_s'] for r in direct):.1f} s")


if __name__ == "__main__":
    main()
