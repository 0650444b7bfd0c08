"""A batch run over a dataset as a job, against ONNX Runtime over the same array, in one run.

    .venv/bin/python bench/dataset_job.py [--rows 200000] [--repeats 2]

Starts the test services, a scratch hub (``bench/infer.py``'s setup: the 784-256-10 MLP), its web server and a
Celery worker; publishes a dataset of ``--rows`` random rows (``.npy``, float32), then times:

- the floor: ``np.load`` of the same file and ``session.run`` of bare ONNX Runtime (one thread, as the
  worker's default) over it in batches of 4,096 rows;
- ``POST …/infer {"dataset": …}`` jobs with ``batch_size`` 64 (the old default) and without one (the
  worker fits batches to ``HUB_INFER_BATCH_MB``), from the job's start to its end as the hub records them
  (loading from the store, the batches through the engine process, publishing the outputs).

Prints rows/s and each job's ratio to the floor. Everything it started is stopped by PID.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

from bench import infer as bench  # noqa: E402 - after the path is set


def publish_dataset(env: dict[str, str], path: Path) -> None:
    script = (
        "from pathlib import Path\n"
        "from django.contrib.auth import get_user_model\n"
        "from hub.registry import services\n"
        "from hub.registry.uploads import StagedFile, sha256_of_file\n"
        "user = get_user_model().objects.get(username='bench')\n"
        f"path = Path({str(path)!r})\n"
        "artifact = services.create_artifact(user, kind='dataset', name='rows', title='rows')\n"
        "services.create_version(artifact, user, files=[StagedFile('rows.npy', path, sha256_of_file(path),"
        " path.stat().st_size)], metadata={'title': 'rows', 'description': 'bench', 'creators': [{'name': 'B'}],"
        " 'license': 'MIT'})\n"
    )
    subprocess.run([str(ROOT / ".venv/bin/python"), "manage.py", "shell", "-c", script], cwd=ROOT, env=env,
                   check=True)


def api(port: int, token: str, path: str, body: dict | None = None) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST" if body is not None else "GET", path,
                           body=json.dumps(body).encode() if body is not None else None,
                           headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


def job_seconds(port: int, token: str, options: dict) -> tuple[float, dict]:
    job = api(port, token, "/api/v1/artifacts/bench/mlp/versions/latest/infer", {"dataset": "bench/rows", **options})
    while job["state"] not in ("succeeded", "failed", "cancelled", "worker_lost"):
        time.sleep(0.5)
        job = api(port, token, f"/api/v1/jobs/{job['id']}/")
    if job["state"] != "succeeded":
        raise RuntimeError(f"job {job['id']} {job['state']}: {job.get('error_code')} {job.get('error_detail')}")
    started, finished = (datetime.fromisoformat(job[key]) for key in ("started", "finished"))
    return (finished - started).total_seconds(), job


def floor(model: Path, data: Path) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    started = time.perf_counter()
    x = np.load(data)
    parts = [session.run(None, {"x": x[i:i + 4096]})[0] for i in range(0, len(x), 4096)]
    assert sum(len(p) for p in parts) == len(x)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from hub.web.server import web_command

    env, work = bench.scratch_stack("hub-bench-dataset-")
    python = str(ROOT / ".venv/bin/python")
    procs: list[subprocess.Popen] = []
    try:
        token = bench.setup_hub(env, work)
        data = work / "rows.npy"
        np.save(data, np.random.default_rng(0).standard_normal((args.rows, 784)).astype(np.float32))
        publish_dataset(env, data)
        port = 17000 + os.getpid() % 1000
        procs.append(bench.start_worker(env, work))
        procs.append(subprocess.Popen(web_command(python, f"127.0.0.1:{port}", 1), cwd=ROOT, env=env,
                                      stdout=open(work / "web.log", "w"), stderr=subprocess.STDOUT))
        bench.wait_port(port)
        bench.wait_worker(env["HUB_BROKER_URL"])
        bench.wait_jobs(env)
        job_seconds(port, token, {"batch_size": 4096})  # warm: the model loaded in the task's engine
        rows: dict[str, list[float]] = {"floor": [], "batch_size 64": [], "batch_size unset": []}
        for _ in range(args.repeats):
            rows["floor"].append(args.rows / floor(work / "mlp.onnx", data))
            rows["batch_size 64"].append(args.rows / job_seconds(port, token, {"batch_size": 64})[0])
            seconds, job = job_seconds(port, token, {})
            rows["batch_size unset"].append(args.rows / seconds)
        print(f"# bench/dataset_job.py {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({os.cpu_count()} "
              f"cores): {args.rows} rows x 784 float32 ({data.stat().st_size / 2**20:.0f} MiB), the MLP, best of "
              f"{args.repeats}; load {os.getloadavg()}")
        print("# the unset job's log:", "; ".join(f"{line['time'][11:23]} {line['message'][:60]}"
                                                 for line in job.get("log", [])))
        print("| path | rows/s | vs the floor |")
        print("|---|---|---|")
        best = {label: max(values) for label, values in rows.items()}
        for label, value in best.items():
            print(f"| {label} | {value:,.0f} | {value / best['floor']:.2f}x |")
    finally:
        bench.stop_all(procs, env)


if __name__ == "__main__":
    main()
