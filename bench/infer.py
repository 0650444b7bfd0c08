"""Synchronous inference latency and throughput through the real worker path, next to bare ONNX Runtime.

    .venv/bin/python bench/infer.py [--seconds 20] [--clients 4] [--web-workers 2]

Starts the test services (scripts/services.sh: PostgreSQL and Redis on 127.0.0.1), a scratch database
``hpcfair_bench_infer``, the hub's web server (granian, ``hub.web.server``) and a Celery worker
(``-Q convert,cpu``, as in docker-compose.yml), publishes a 784-256-10 MLP and a small CNN, then measures
for each model:

- the floor: ``session.run`` of bare ONNX Runtime in this process;
- the gateway over HTTP with keep-alive (web -> Redis lane -> worker thread -> back), JSON and .npy
  bodies: p50/p95 latency of one client, then requests/s of ``--clients`` client processes for
  ``--seconds`` seconds;
- the same JSON requests through a second server started with ``HUB_GATEWAY_EXPRESS=0`` (every request
  through Django's whole request cycle), and through gunicorn's gthread worker (the server the hub used
  before): what the express path and the server each save, measured in the same run.

Everything it started is stopped by PID at the end and the scratch database is dropped.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import multiprocessing
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
DB = "hpcfair_bench_infer"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bare(model: bytes, x: np.ndarray, n: int = 2000) -> list[float]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for _ in range(50):
        session.run(None, {name: x})
    times = []
    for _ in range(n):
        start = time.perf_counter()
        session.run(None, {name: x})
        times.append(time.perf_counter() - start)
    return times


def request_body(kind: str, name: str, x: np.ndarray) -> tuple[bytes, str]:
    if kind == "json":
        return json.dumps({"inputs": {name: x.tolist()}}).encode(), "application/json"
    buffer = io.BytesIO()
    np.save(buffer, x)
    return buffer.getvalue(), "application/x-npy"


def client_loop(port: int, path: str, token: str, body: bytes, content_type: str, seconds: float,
                count: int, results) -> None:
    """Sequential keep-alive requests: ``count`` of them, or as many as fit in ``seconds``."""
    connection = http.client.HTTPConnection("127.0.0.1", port)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
    times, errors, lane, run = [], 0, [], []
    end = time.perf_counter() + seconds
    while (count and len(times) + errors < count) or (not count and time.perf_counter() < end):
        start = time.perf_counter()
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        if response.status == 200:
            times.append(time.perf_counter() - start)
            timing = dict(part.strip().split(";dur=") for part in response.getheader("Server-Timing", "").split(","))
            lane.append(float(timing["lane"]) / 1e3)
            run.append(float(timing["run"]) / 1e3)
        else:
            errors += 1
    connection.close()
    results.put((times, errors, lane, run))


def run_clients(clients: int, *args) -> tuple[list[float], int]:
    queue = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=client_loop, args=(*args, queue)) for _ in range(clients)]
    for proc in procs:
        proc.start()
    gathered = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    flat = [[t for item in gathered for t in item[index]] for index in (0, 2, 3)]
    return flat[0], sum(item[1] for item in gathered), flat[1], flat[2]


def interleaved(ports: list[int], path: str, token: str, body: bytes, content_type: str, total: int,
                where: str, block: int = 100) -> dict[int, tuple[list[float], list[float], list[float]]]:
    """One client's (latencies, lane times, run times) on each port, ``total`` requests each after 100 to
    warm up, taken in alternating blocks so that this VM's noisy periods fall on every series alike."""
    series: dict[int, tuple[list[float], list[float], list[float]]] = {port: ([], [], []) for port in ports}
    for port in ports:
        warm, errors, _, _ = run_clients(1, port, path, token, body, content_type, 0, 100)
        assert errors == 0 and warm, f"warm-up on port {port} failed ({errors} errors); {where}"
    for _ in range(max(1, total // block)):
        for port in ports:
            times, errors, lane, run = run_clients(1, port, path, token, body, content_type, 0, block)
            assert errors == 0, f"{errors} errors on port {port}; {where}"
            for collected, new in zip(series[port], (times, lane, run), strict=True):
                collected.extend(new)
    return series


def services_env() -> dict[str, str]:
    out = subprocess.run([str(ROOT / "scripts/services.sh"), "start"], capture_output=True, text=True, check=True)
    env = dict(os.environ)
    for line in out.stdout.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    base = env["DATABASE_URL"].rsplit("/", 1)[0]
    env["DATABASE_URL"] = f"{base}/{DB}"
    env["HUB_BROKER_URL"] = env["HUB_BROKER_URL"].rsplit("/", 1)[0] + "/3"
    return env


def psql(env: dict[str, str], sql: str) -> None:
    base = env["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres"
    subprocess.run(["psql", base, "-qc", sql], check=True, env=env, capture_output=True)


def setup_hub(env: dict[str, str], work: Path) -> str:
    """Migrate the scratch database, publish the models, return a write token."""
    python = str(ROOT / ".venv/bin/python")
    subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    script = (
        "import sys\n"
        "sys.path.insert(0, '.')\n"
        "from pathlib import Path\n"
        "from django.contrib.auth import get_user_model\n"
        "from hub.accounts.models import ApiToken\n"
        "from hub.registry import services\n"
        "from hub.registry.uploads import StagedFile, sha256_of_file\n"
        "from tests.gateway import models\n"
        "user = get_user_model().objects.create_user('bench', password='bench-pw-12345')\n"
        f"work = Path({str(work)!r})\n"
        "for name, build in (('mlp', models.mlp), ('cnn', models.cnn)):\n"
        "    path = work / f'{name}.onnx'\n"
        "    path.write_bytes(build())\n"
        "    artifact = services.create_artifact(user, kind='model', name=name, title=name)\n"
        "    services.create_version(artifact, user, files=[StagedFile(f'{name}.onnx', path, sha256_of_file(path),"
        " path.stat().st_size)], metadata={'title': name, 'description': 'bench', 'creators': [{'name': 'B'}],"
        " 'license': 'MIT', 'framework': 'onnx', 'task': 'classification'})\n"
        "print(ApiToken.issue(user, scope='write')[1])\n"
    )
    out = subprocess.run([python, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def wait_port(port: int, timeout: float = 60) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(port)


def wait_worker(url: str, timeout: float = 120) -> None:
    """Until the Celery worker announces its ``cpu`` lane (its start takes seconds to a minute)."""
    import redis

    from hub.gateway.lane import ALIVE_S, RedisLane

    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + timeout
    while not client.zcount(RedisLane._alive("cpu"), time.time() - ALIVE_S, "+inf"):
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not announce its lane")
        time.sleep(0.5)


def wait_jobs(env: dict[str, str], timeout: float = 300) -> None:
    """Until the jobs that publishing started (the models' verification) have ended: the worker runs them
    on the same two cores the measurements use."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(["psql", env["DATABASE_URL"], "-tAc",
                              "SELECT count(*) FROM jobs_job WHERE state IN ('queued', 'running')"],
                             capture_output=True, text=True, check=True, env=env).stdout
        if int(out.strip()) == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the hub's own jobs did not end")
        time.sleep(0.5)


def stop_all(procs: list[subprocess.Popen], env: dict[str, str]) -> None:
    """Stop what a run started (by PID, last first) and drop its scratch database."""
    for proc in reversed(procs):
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    psql(env, f"DROP DATABASE IF EXISTS {DB}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--single", type=int, default=1000, help="requests for the one-client latency")
    args = parser.parse_args()
    from hub.web.server import web_command
    from tests.gateway import models

    env = services_env()
    # The models' automatic verification still runs (and is waited for); building their MLCube images
    # with podman would only compete for the CPU (bench/cube.py times that).
    env.update({"HUB_STORAGE": "filesystem", "HUB_LOG_LEVEL": "WARNING", "HUB_CUBE_ON_CONVERT": "off"})
    work = Path(tempfile.mkdtemp(prefix="hub-bench-infer-"))
    env.update({"HUB_VAR_DIR": str(work / "var"), "HUB_STORAGE_DIR": str(work / "blobs")})
    psql(env, f"DROP DATABASE IF EXISTS {DB}")
    psql(env, f"CREATE DATABASE {DB}")
    procs: list[subprocess.Popen] = []
    try:
        token = setup_hub(env, work)
        port = 18000 + os.getpid() % 1000
        python = str(ROOT / ".venv/bin/python")
        procs.append(subprocess.Popen([python, "-m", "celery", "-A", "workers", "worker", "-Q", "convert,cpu",
                                       "--concurrency", "1", "--loglevel", "WARNING"], cwd=ROOT, env=env,
                                      stdout=open(work / "worker.log", "w"), stderr=subprocess.STDOUT))
        gunicorn = [python, "-m", "gunicorn", "hub.wsgi", "--bind", f"127.0.0.1:{port + 2}", "--workers",
                    str(args.web_workers), "--worker-class", "gthread", "--threads", "4", "--log-level", "warning"]
        for web_port, express, command in ((port, "1", web_command(python, f"127.0.0.1:{port}", args.web_workers)),
                                           (port + 1, "0", web_command(python, f"127.0.0.1:{port + 1}",
                                                                       args.web_workers)),
                                           (port + 2, "1", gunicorn)):
            procs.append(subprocess.Popen(command, cwd=ROOT, env={**env, "HUB_GATEWAY_EXPRESS": express},
                                          stdout=open(work / f"web-{web_port}.log", "w"), stderr=subprocess.STDOUT))
            wait_port(web_port)
        wait_worker(env["HUB_BROKER_URL"])
        wait_jobs(env)
        print(f"# bench/infer.py on {platform.node()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}")
        print(f"# granian {args.web_workers} WSGI workers x 4 threads; Celery worker -Q convert,cpu "
              f"(lane threads: HUB_GATEWAY_THREADS, default 2); Redis lane; PostgreSQL")
        rows, parts = [], []
        for name, build, shape in (("mlp", models.mlp, (1, 784)), ("cnn", models.cnn, (1, 1, 28, 28))):
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            floor = bare(build(), x)
            rows.append((name, "bare ORT session.run", percentile(floor, .5), percentile(floor, .95), None))
            input_name = "x" if name == "mlp" else "image"
            for kind in ("npy", "json"):
                body, content_type = request_body(kind, input_name, x)
                path = f"/api/v1/artifacts/bench/{name}/versions/latest/infer"
                others = [(port + 1, "without the express path"), (port + 2, "gunicorn gthread instead of granian")]
                ports = [port, *(other for other, _ in others)] if kind == "json" else [port]
                series = interleaved(ports, path, token, body, content_type, args.single, f"see {work}")
                single, lane, run = series[port]
                many, many_errors, _, _ = run_clients(args.clients, port, path, token, body, content_type,
                                                      args.seconds, 0)
                rows.append((name, f"gateway, {kind} body", percentile(single, .5), percentile(single, .95),
                             (len(many) / args.seconds, many_errors, percentile(many, .5))))
                parts.append((name, kind, percentile(single, .5), percentile(lane, .5), percentile(run, .5)))
                for other, what in others if kind == "json" else []:
                    times = series[other][0]
                    rows.append((name, f"gateway, json body, {what}", percentile(times, .5), percentile(times, .95),
                                 None))
        print(f"\n| model | path | p50 ms | p95 ms | {args.clients} clients req/s (p50 ms) |")
        print("|---|---|---|---|---|")
        for name, what, p50, p95, load in rows:
            rate = f"{load[0]:.0f} ({load[2] * 1e3:.2f} ms, {load[1]} errors)" if load else "-"
            print(f"| {name} | {what} | {p50 * 1e3:.3f} | {p95 * 1e3:.3f} | {rate} |")
        print("\nWhere one client's median request goes (ms): HTTP total = web (Django, parsing, encoding, "
              "granian) + lane (Redis round trip and the worker) ; run = session.run inside the worker")
        print("| model | body | total | lane (incl. run) | run | web + HTTP |")
        print("|---|---|---|---|---|---|")
        for name, kind, total, lane_ms, run_ms in parts:
            print(f"| {name} | {kind} | {total * 1e3:.3f} | {lane_ms * 1e3:.3f} | {run_ms * 1e3:.3f} | "
                  f"{(total - lane_ms) * 1e3:.3f} |")
        print("\nTargets (issue 5): gateway sync p50 <= 3 ms and >= 300 req/s with 4 clients.")
        print(f"mean bare run: mlp {statistics.mean(bare(models.mlp(), np.zeros((1, 784), np.float32), 200)) * 1e3:.3f}"
              " ms")
    finally:
        stop_all(procs, env)


if __name__ == "__main__":
    main()
