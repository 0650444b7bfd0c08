"""The Slurm executor next to the Celery path: scheduling overhead per job, and job-array scale-out.

    .venv/bin/python bench/slurm.py [--jobs 10] [--rows 3000]

Starts the test services (scripts/services.sh: PostgreSQL, Redis and the private one-machine Slurm cluster
of scripts/slurm.sh), a scratch database ``hpcfair_bench_slurm`` and, one after the other, a Celery worker
with the default executor and one with ``HUB_EXECUTOR=slurm``. Jobs are made through the REST API in this
process (Django's test client) and timed from the request to the job's final state (the hub's own
polling of Slurm included), as a user sees them:

- overhead: ``--jobs`` batch inferences of a 784-256-10 MLP over 4 rows, one after the other, on each path;
- throughput: a batch inference over ``--rows`` rows of 1024 features through 64 chained 1024x1024 MatMuls,
  as one Celery job, and as Slurm job arrays of 1, 2 and 4 tasks (``worker_num``), next to the same rows
  run by bare ONNX Runtime in this process (one thread, batches of 64); each the best of ``--repeat`` runs.

Everything it started is stopped by PID at the end and the scratch database is dropped.
"""

from __future__ import annotations

import argparse
import io
import json
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
DB = "hpcfair_bench_slurm"
BATCH = 64


def services_env(work: Path) -> dict[str, str]:
    out = subprocess.run([str(ROOT / "scripts/services.sh"), "start"], capture_output=True, text=True, check=True)
    env = dict(os.environ)
    for line in out.stdout.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    if "SLURM_CONF" not in env:
        sys.exit("no Slurm cluster: install slurm-wlm and munge (scripts/system-deps.sh bench)")
    env["DATABASE_URL"] = env["DATABASE_URL"].rsplit("/", 1)[0] + f"/{DB}"
    env["HUB_BROKER_URL"] = env["HUB_BROKER_URL"].rsplit("/", 1)[0] + "/4"
    env.update({"HUB_STORAGE": "filesystem", "HUB_STORAGE_DIR": str(work / "blobs"), "HUB_VAR_DIR": str(work / "var"),
                "HUB_UPLOAD_DIR": str(work / "uploads"), "HUB_SLURM_JOB_DIR": str(work / "slurm"),
                "HUB_CUBE_ON_CONVERT": "off", "HUB_LOG_LEVEL": "WARNING", "HUB_SLURM_POLL_S": "0.25",
                "HUB_SLURM_MEM": "1G", "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"})
    return env


def psql(env: dict[str, str], sql: str) -> None:
    base = env["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres"
    subprocess.run(["psql", base, "-qc", sql], check=True, env=env, capture_output=True)


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def publish(user, name: str, kind: str, files: dict[str, bytes], work: Path) -> None:
    from hub.registry import services
    from hub.registry.uploads import StagedFile, sha256_of_file

    artifact = services.create_artifact(user, kind=kind, name=name, title=name)
    staged = []
    for path, data in files.items():
        local = work / f"{name}-{path}"
        local.write_bytes(data)
        staged.append(StagedFile(path, local, sha256_of_file(local), local.stat().st_size))
    metadata = {"title": name, "description": "bench", "creators": [{"name": "B"}], "license": "MIT"}
    if kind == "model":
        metadata.update(framework="onnx", task="regression")
    services.create_version(artifact, user, files=staged, metadata=metadata)


def start_worker(env: dict[str, str], work: Path, executor: str) -> subprocess.Popen:
    log = work / f"worker-{executor}.log"
    proc = subprocess.Popen([str(ROOT / ".venv/bin/python"), "-m", "celery", "-A", "workers", "worker", "-Q",
                             "convert,cpu", "--concurrency", "1", "--pool", "solo", "--loglevel", "INFO"],
                            cwd=ROOT, env={**env, "HUB_EXECUTOR": executor}, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while "ready." not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(log.read_text()[-3000:])
        time.sleep(0.2)
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_job(client, token: str, model: str, dataset: str, **options) -> tuple[float, dict]:
    """Seconds from the request to the job's final state, and the job."""
    from hub.jobs.models import Job

    started = time.perf_counter()
    response = client.post(f"/api/v1/artifacts/bench/{model}/versions/latest/infer",
                           json.dumps({"dataset": f"bench/{dataset}", "batch_size": BATCH, **options}),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 202, response.content
    job_id = response.json()["id"]
    while True:
        job = Job.objects.get(pk=job_id)
        if job.is_final:
            break
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    return seconds, {"execution": job.execution, "result": job.result, "phases": phases(job)}


def phases(job) -> tuple[float, float, float] | None:
    """A Slurm job's seconds from creation to sbatch's answer, from there to the poller seeing it run, and from
    there to succeeded (the runner's start and run, the poll, the publication)."""
    from datetime import datetime

    submitted = next((datetime.fromisoformat(line["time"]) for line in job.log
                      if line["message"].startswith("submitted to Slurm")), None)
    if submitted is None or job.started is None:
        return None
    return ((submitted - job.created).total_seconds(), (job.started - submitted).total_seconds(),
            (job.finished - job.started).total_seconds())


def bare(model: bytes, x: np.ndarray) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    started = time.perf_counter()
    for start in range(0, len(x), BATCH):
        session.run(None, {"x": x[start:start + BATCH]})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hub-bench-slurm-"))
    env = services_env(work)
    psql(env, f"DROP DATABASE IF EXISTS {DB}")
    psql(env, f"CREATE DATABASE {DB}")
    subprocess.run([str(ROOT / ".venv/bin/python"), "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "hub.settings"
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from hub.accounts.models import ApiToken
    from tests.gateway import models

    user = get_user_model().objects.create_user("bench")  # API tokens only: no password
    token = ApiToken.issue(user, scope="write")[1]
    heavy = models.slow(size=1024, repeats=64)
    rows = np.random.default_rng(0).standard_normal((args.rows, 1024)).astype(np.float32) / 32
    publish(user, "mlp", "model", {"mlp.onnx": models.mlp()}, work)
    publish(user, "heavy", "model", {"heavy.onnx": heavy}, work)
    publish(user, "four", "dataset", {"x.npy": npy(np.ones((4, 784), np.float32))}, work)
    publish(user, "rows", "dataset", {"x.npy": npy(rows)}, work)
    client = Client(HTTP_HOST="127.0.0.1")
    overhead: dict[str, list[float]] = {}
    split: list[tuple[float, float, float]] = []
    # Each throughput figure is the best of --repeat runs: the machine is shared, and a run only gets slower.
    throughput: list[tuple[str, float]] = [("bare ONNX Runtime in one process (1 thread)",
                                            min(bare(heavy, rows) for _ in range(args.repeat)))]
    try:
        for executor in ("celery", "slurm"):
            settings.HUB_EXECUTOR = executor
            worker = start_worker(env, work, executor)
            try:
                run_job(client, token, "mlp", "four")  # warm: the worker's first job loads its modules
                runs = [run_job(client, token, "mlp", "four") for _ in range(args.jobs)]
                overhead[executor] = [seconds for seconds, _ in runs]
                split = [job["phases"] for _, job in runs if job["phases"]]
                if executor == "celery":
                    throughput.append(("Celery job (1 worker, 1 thread)", min(
                        run_job(client, token, "heavy", "rows", worker_num=1)[0] for _ in range(args.repeat))))
                else:
                    for tasks in (1, 2, 4):
                        seconds = []
                        for _ in range(args.repeat):
                            took, job = run_job(client, token, "heavy", "rows", worker_num=tasks)
                            assert job["slurm"]["tasks"] == tasks
                            seconds.append(took)
                        throughput.append((f"Slurm job array, {tasks} task{'s' if tasks > 1 else ''}", min(seconds)))
            finally:
                stop(worker)
    finally:
        from django.db import connections

        connections.close_all()
        psql(env, f"DROP DATABASE IF EXISTS {DB}")
    print(f"# bench/slurm.py on {platform.node()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}; "
          f"Slurm {subprocess.run(['sinfo', '-V'], capture_output=True, text=True).stdout.strip()}")
    print("\n| path | jobs | median s (request -> succeeded) | min s | max s |\n|---|---|---|---|---|")
    for executor, times in overhead.items():
        print(f"| {executor} | {len(times)} | {statistics.median(times):.2f} | {min(times):.2f} | {max(times):.2f} |")
    if split:
        medians = [statistics.median(p[i] for p in split) for i in range(3)]
        print(f"\nSlurm path, median seconds: creation -> sbatch answered {medians[0]:.2f}, -> seen running "
              f"{medians[1]:.2f}, -> succeeded {medians[2]:.2f}")
    base = throughput[0][1]
    print(f"\n| {args.rows} rows x 1024 through 64 MatMuls 1024x1024 | seconds | rows/s | vs one process |"
          "\n|---|---|---|---|")
    for what, seconds in throughput:
        print(f"| {what} | {seconds:.2f} | {args.rows / seconds:.0f} | {base / seconds:.2f}x |")


if __name__ == "__main__":
    main()
