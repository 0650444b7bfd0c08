"""Synchronous inference as users run it, next to the floor and MLflow, in one interleaved run.

    .venv/bin/python bench/infer.py [--single 1000] [--seconds 10] [--clients 4]
    scripts/bench-venv.sh     # once, for MLflow (optional): .venv-bench from requirements/bench.txt

Publishes the 784-256-10 MLP and a small CNN (tests/gateway/models.py) and serves them five ways at once:

- **default hub**: ``manage.py hub_serve`` as ``make run`` starts it (granian with its access log, one
  embedded Celery worker): SQLite and file presence under a scratch ``HUB_VAR_DIR``, no Redis;
- **Redis hub**: the same ``hub_serve`` on the full stack's services (scripts/services.sh: PostgreSQL for
  the database, Redis for the broker and presence), one Celery worker (``make stack`` starts two); its web
  processes reach the worker's engines over the channel's ``ipc://`` door (``hub.gateway.channel``);
- **lane**: a second, web-only ``hub_serve`` on the same stack and worker with ``HUB_GATEWAY_IPC=0``, so
  its runs go to the worker's ``tcp://`` door with CURVE, as a web node on another host sends them
  (``--no-lane`` leaves it out);
- **floor**: ``bench/floor.py``, a WSGI app on granian that calls ONNX Runtime and nothing else;
- **MLflow**: ``mlflow models serve --env-manager local`` (MLflow 3.x from ``.venv-bench``) of the same
  ONNX files, one server per model; skipped, with a line saying so, when ``.venv-bench`` is absent;

every server with 2 web workers (MLflow: its default, 1) and ONNX Runtime on one thread. For each model
and body (``.npy`` and JSON; MLflow takes JSON only) it measures one client's p50/p95 over ``--single``
keep-alive requests, all series in alternating blocks of 100 so that this VM's noisy periods fall on every
series alike, then the requests/s of ``--clients`` client processes, each series for ``--seconds`` split
into alternating rounds; and prints ratios against the floor and MLflow and the issue's targets (issue 39).

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
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB = "hpcfair_bench_infer"
BENCH_VENV = ROOT / ".venv-bench"
MODELS = (("mlp", (1, 784), "x"), ("cnn", (1, 1, 28, 28), "image"))
# Rate limits counted as users run them (hub.ops.throttles), at a rate the benches do not reach: the person's
# and the inference rates, whose defaults (60,000 a minute) the 4-client series would pass.
RATES = {"HUB_THROTTLE_USER": "1000000/min", "HUB_THROTTLE_INFERENCE": "1000000/min"}


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


def _server_timing(header: str) -> dict[str, float]:
    return {name.strip(): float(value) for name, _, value in
            (part.partition(";dur=") for part in header.split(",")) if value}


def client_loop(port: int, path: str, token: str, body: bytes, content_type: str, seconds: float,
                count: int, results) -> None:
    """Sequential keep-alive requests: ``count`` of them, or as many as fit in ``seconds``. Lane and run
    times come from the hub's ``Server-Timing`` (0 where a server sends none)."""
    connection = http.client.HTTPConnection("127.0.0.1", port)
    headers = {"Content-Type": content_type, **({"Authorization": f"Bearer {token}"} if token else {})}
    times, errors, lane, run = [], 0, [], []
    end = time.perf_counter() + seconds
    while (count and len(times) + errors < count) or (not count and time.perf_counter() < end):
        start = time.perf_counter()
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        if response.status == 200:
            times.append(time.perf_counter() - start)
            timing = _server_timing(response.getheader("Server-Timing", ""))
            lane.append(timing.get("lane", 0) / 1e3)
            run.append(timing.get("run", 0) / 1e3)
        else:
            errors += 1
    connection.close()
    results.put((times, errors, lane, run))


def run_clients(clients: int, *args) -> tuple[list[float], int, list[float], list[float]]:
    queue = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=client_loop, args=(*args, queue)) for _ in range(clients)]
    for proc in procs:
        proc.start()
    gathered = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    flat = [[t for item in gathered for t in item[index]] for index in (0, 2, 3)]
    return flat[0], sum(item[1] for item in gathered), flat[1], flat[2]


@dataclass
class Target:
    """One series: a server and the request sent to it."""

    label: str
    port: int
    path: str
    token: str
    body: bytes
    content_type: str

    def args(self) -> tuple:
        return self.port, self.path, self.token, self.body, self.content_type


def interleaved_targets(targets: list[Target], total: int, where: str, block: int = 100
                        ) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """One client's (latencies, lane times, run times) for each target, ``total`` requests each after 100 to
    warm up, taken in alternating blocks so that this VM's noisy periods fall on every series alike."""
    series: dict[str, tuple[list[float], list[float], list[float]]] = {t.label: ([], [], []) for t in targets}
    for target in targets:
        warm, errors, _, _ = run_clients(1, *target.args(), 0, 100)
        assert errors == 0 and warm, f"warm-up of {target.label} failed ({errors} errors); {where}"
    for _ in range(max(1, total // block)):
        for target in targets:
            times, errors, lane, run = run_clients(1, *target.args(), 0, block)
            assert errors == 0, f"{errors} errors from {target.label}; {where}"
            for collected, new in zip(series[target.label], (times, lane, run), strict=True):
                collected.extend(new)
    return series


def interleaved(ports: list[int], path: str, token: str, body: bytes, content_type: str, total: int,
                where: str, block: int = 100) -> dict[int, tuple[list[float], list[float], list[float]]]:
    """``interleaved_targets`` for the same request to several ports (bench/infer_ab.py)."""
    targets = [Target(str(port), port, path, token, body, content_type) for port in ports]
    found = interleaved_targets(targets, total, where, block)
    return {port: found[str(port)] for port in ports}


def throughput(targets: list[Target], clients: int, seconds: float, where: str, rounds: int = 2
               ) -> dict[str, tuple[float, float]]:
    """Requests/s and p50 of ``clients`` client processes on each target, ``seconds`` each in all, taken in
    ``rounds`` alternating rounds."""
    done: dict[str, list[float]] = {t.label: [] for t in targets}
    for _ in range(rounds):
        for target in targets:
            times, errors, _, _ = run_clients(clients, *target.args(), seconds / rounds, 0)
            assert errors == 0, f"{errors} errors from {target.label} under load; {where}"
            done[target.label].extend(times)
    return {label: (len(times) / seconds, percentile(times, .5)) for label, times in done.items()}


# --- setting up the servers ----------------------------------------------------------------------------


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


def scratch_stack(prefix: str) -> tuple[dict[str, str], Path]:
    """The full stack's environment for a scratch hub (``services_env``, a filesystem store and var dir in a
    new folder named ``prefix``..., no MLCube builds) with its database made afresh; and that folder."""
    env = services_env()
    work = Path(tempfile.mkdtemp(prefix=prefix))
    env.update({"HUB_STORAGE": "filesystem", "HUB_LOG_LEVEL": "WARNING", "HUB_CUBE_ON_CONVERT": "off",
                **RATES, "HUB_VAR_DIR": str(work / "var"), "HUB_STORAGE_DIR": str(work / "blobs")})
    psql(env, f"DROP DATABASE IF EXISTS {DB}")
    psql(env, f"CREATE DATABASE {DB}")
    return env, work


def start_worker(env: dict[str, str], work: Path) -> subprocess.Popen:
    """A Celery worker on queues convert and cpu (as docker-compose.yml runs it); its log in ``work``."""
    return subprocess.Popen([str(ROOT / ".venv/bin/python"), "-m", "celery", "-A", "workers", "worker", "-Q",
                             "convert,cpu", "--concurrency", "1", "--loglevel", "WARNING"], cwd=ROOT, env=env,
                            stdout=open(work / "worker.log", "w"), stderr=subprocess.STDOUT)


def embedded_env(var: Path) -> dict[str, str]:
    """``make run``'s configuration: no DATABASE_URL, no broker URL (SQLite and files under ``var``)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "HUB_BROKER_URL", "HUB_GATEWAY_URL", "HUB_GATEWAY_TCP", "HUB_STORAGE_DIR")}
    env.update({"HUB_VAR_DIR": str(var), "HUB_STORAGE": "filesystem", **RATES})
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
        "work.mkdir(parents=True, exist_ok=True)\n"
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


def wait_port(port: int, timeout: float = 60, proc: subprocess.Popen | None = None) -> None:
    """Until something listens on ``port``; ``proc``: the server, whose exit ends the wait at once."""
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server for port {port} exited ({proc.returncode}): {proc.args}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(port)


def wait_worker(url: str, timeout: float = 120) -> None:
    """Until the Celery worker announces its ``cpu`` door (its start takes seconds to a minute)."""
    from hub.gateway.presence import RedisPresence

    presence = RedisPresence(url)
    deadline = time.monotonic() + timeout
    while not presence.addresses("cpu"):
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not announce its lane")
        time.sleep(0.5)


def wait_file_worker(var: Path, timeout: float = 120) -> None:
    """Until an embedded worker announces its ``cpu`` door in file presence (``FilePresence.announce``)."""
    folder = var / "gateway" / "alive" / "cpu"
    deadline = time.monotonic() + timeout
    while not (folder.is_dir() and any(e.stat().st_mtime > time.time() - 6 for e in os.scandir(folder))):
        if time.monotonic() > deadline:
            raise TimeoutError("the embedded worker did not announce its lane")
        time.sleep(0.5)


def _open_jobs(env: dict[str, str]) -> int:
    sql = "SELECT count(*) FROM jobs_job WHERE state IN ('queued', 'running')"
    if "DATABASE_URL" not in env:
        with sqlite3.connect(Path(env["HUB_VAR_DIR"]) / "hub.sqlite3", timeout=30) as db:
            return db.execute(sql).fetchone()[0]
    return int(subprocess.run(["psql", env["DATABASE_URL"], "-tAc", sql], capture_output=True, text=True,
                              check=True, env=env).stdout.strip())


def wait_jobs(env: dict[str, str], timeout: float = 300) -> None:
    """Until the jobs that publishing started (the models' verification) have ended: the worker runs them
    on the same two cores the measurements use."""
    deadline = time.monotonic() + timeout
    while _open_jobs(env):
        if time.monotonic() > deadline:
            raise TimeoutError("the hub's own jobs did not end")
        time.sleep(0.5)


def stop_all(procs: list[subprocess.Popen], env: dict[str, str]) -> None:
    """Stop what a run started (by PID, last first) and drop its scratch database."""
    for proc in reversed(procs):
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    psql(env, f"DROP DATABASE IF EXISTS {DB}")


def start_mlflow(work: Path, port: int, procs: list[subprocess.Popen], workers: int) -> dict[str, int]:
    """One ``mlflow models serve`` per model from ``.venv-bench`` (ports from ``port``), or {} without it."""
    python = BENCH_VENV / "bin/python"
    if not (BENCH_VENV / "bin/mlflow").exists():
        print("# MLflow skipped: no .venv-bench (scripts/bench-venv.sh installs requirements/bench.txt there)")
        return {}
    from tests.gateway import models

    ports = {}
    # mlflow models serve runs `uvicorn` from PATH.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": f"file://{work / 'mlruns'}",
           "PATH": f"{BENCH_VENV / 'bin'}:{os.environ['PATH']}"}
    for offset, (name, _, _) in enumerate(MODELS):
        path = work / f"mlflow-{name}.onnx"
        path.write_bytes(getattr(models, name)())
        saved = work / f"mlflow-{name}"
        # ONNX Runtime on one thread, as everywhere else in this run.
        save = ("import sys, onnx, mlflow.onnx; mlflow.onnx.save_model(onnx.load(sys.argv[1]), sys.argv[2], "
                "onnx_session_options={'intra_op_num_threads': 1, 'inter_op_num_threads': 1})")
        subprocess.run([str(python), "-c", save, str(path), str(saved)], check=True, env=env, capture_output=True)
        ports[name] = port + offset
        procs.append(subprocess.Popen([str(BENCH_VENV / "bin/mlflow"), "models", "serve", "-m", str(saved),
                                       "--env-manager", "local", "-h", "127.0.0.1", "-p", str(ports[name]),
                                       "--workers", str(workers)], env=env, cwd=work,
                                      stdout=open(work / f"mlflow-{name}.log", "w"), stderr=subprocess.STDOUT))
    for mlflow_port, proc in zip(ports.values(), procs[-len(ports):], strict=True):
        wait_port(mlflow_port, timeout=180, proc=proc)
    return ports


def mlflow_version() -> str:
    return subprocess.run([str(BENCH_VENV / "bin/python"), "-c", "import mlflow; print(mlflow.__version__)"],
                          capture_output=True, text=True).stdout.strip() or "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=int, default=1000, help="requests per series for the one-client latency")
    parser.add_argument("--seconds", type=float, default=10, help="seconds per series with --clients clients")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--models", default="mlp,cnn")
    # MLflow's own default; with 2 uvicorn workers it answered one client in ~44 ms here (bench/RESULTS.md).
    parser.add_argument("--mlflow-workers", type=int, default=1)
    parser.add_argument("--no-lane", action="store_true", help="leave out the web-only node on the tcp:// door")
    args = parser.parse_args()
    from hub.web.server import web_command
    from tests.gateway import models

    python = str(ROOT / ".venv/bin/python")
    work = Path(tempfile.mkdtemp(prefix="hub-bench-infer-"))
    stack = services_env()
    quiet = {"HUB_LOG_LEVEL": "WARNING", "HUB_CUBE_ON_CONVERT": "off",  # no MLCube image builds on these cores
             **RATES}
    stack.update({"HUB_STORAGE": "filesystem", "HUB_VAR_DIR": str(work / "stack"),
                  "HUB_GATEWAY_TCP": os.environ.get("HUB_GATEWAY_TCP") or "127.0.0.1:0",
                  "HUB_STORAGE_DIR": str(work / "stack-blobs"), **quiet})
    default = {**embedded_env(work / "default"), **quiet}
    psql(stack, f"DROP DATABASE IF EXISTS {DB}")
    psql(stack, f"CREATE DATABASE {DB}")
    procs: list[subprocess.Popen] = []
    base = int(os.environ.get("BENCH_PORT") or 18000 + os.getpid() % 1000 * 8)  # base..base+5 on 127.0.0.1
    ports = {"default": base, "redis": base + 1, "floor": base + 2, **({} if args.no_lane else {"lane": base + 5})}
    try:
        tokens = {"redis": setup_hub(stack, work / "stack-models")}
        for label, env, workers in (("default", default, []), ("redis", stack, ["--no-migrate"])):
            procs.append(subprocess.Popen([python, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{ports[label]}",
                                           "--web-workers", str(args.web_workers), "--no-demo", *workers],
                                          cwd=ROOT, env=env, stdout=open(work / f"{label}.log", "w"),
                                          stderr=subprocess.STDOUT))
        if not args.no_lane:  # web only, on the Redis stack's worker, over the lane
            procs.append(subprocess.Popen([python, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{ports['lane']}",
                                           "--web-workers", str(args.web_workers), "--no-demo", "--no-migrate",
                                           "--celery-workers", "0"], cwd=ROOT, env={**stack, "HUB_GATEWAY_IPC": "0"},
                                          stdout=open(work / "lane.log", "w"), stderr=subprocess.STDOUT))
            tokens["lane"] = tokens["redis"]
        # The embedded broker's folders are made by hub_serve as it starts: publish (which queues the models'
        # verification) once it serves.
        wait_port(ports["default"], timeout=180)
        tokens["default"] = setup_hub(default, work / "default-models")
        floor_models = ",".join(f"{name}={work / 'default-models' / name}.onnx" for name, _, _ in MODELS)
        procs.append(subprocess.Popen(web_command(python, f"127.0.0.1:{ports['floor']}", args.web_workers,
                                                  app="bench.floor:app"), cwd=ROOT,
                                      env={**os.environ, "FLOOR_MODELS": floor_models, "OMP_NUM_THREADS": "1"},
                                      stdout=open(work / "floor.log", "w"), stderr=subprocess.STDOUT))
        mlflow = start_mlflow(work, base + 3, procs, args.mlflow_workers)
        for port in ports.values():
            wait_port(port, timeout=180)
        wait_file_worker(work / "default")
        wait_worker(stack["HUB_BROKER_URL"])
        wait_jobs(default)
        wait_jobs(stack)
        load = os.getloadavg()
        print(f"# bench/infer.py {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} ({os.cpu_count()} CPUs); "
              f"load at the start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print(f"# hubs and floor: {args.web_workers} web workers; ONNX Runtime 1 thread everywhere; hubs: hub_serve "
              f"with its access log and rate limits (1,000,000 a minute), 1 Celery worker; MLflow: "
              f"{f'{mlflow_version()} models serve, {args.mlflow_workers} worker(s)' if mlflow else 'skipped'}")
        print(f"# one client: {args.single} requests per series in alternating blocks of 100; {args.clients} "
              f"clients: {args.seconds:g} s per series in 2 alternating rounds")
        verdicts = []
        for name, shape, input_name in MODELS:
            if name not in args.models.split(","):
                continue
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            floor_run = percentile(bare(getattr(models, name)(), x), .5)
            targets = []
            for kind in ("npy", "json"):
                body, content_type = request_body(kind, input_name, x)
                for server in ("default", "redis", "lane"):
                    if server not in ports:
                        continue
                    targets.append(Target(f"{server} {kind}", ports[server],
                                          f"/api/v1/artifacts/bench/{name}/versions/latest/infer", tokens[server],
                                          body, content_type))
                targets.append(Target(f"floor {kind}", ports["floor"], f"/{name}", "", body, content_type))
                if mlflow and kind == "json":
                    targets.append(Target("mlflow json", mlflow[name], "/invocations", "", body, content_type))
            series = interleaved_targets(targets, args.single, f"see {work}")
            rates = throughput(targets, args.clients, args.seconds, f"see {work}")
            p50 = {label: percentile(times, .5) for label, (times, _, _) in series.items()}
            print(f"\n## {name}, one row (bare session.run p50 {floor_run * 1e3:.3f} ms)\n")
            print(f"| server | body | p50 ms | p95 ms | lane ms | run ms | x floor | x MLflow | {args.clients} clients "
                  "req/s (p50 ms) | req/s x MLflow |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            for target in targets:
                times, lane, run = series[target.label]
                server, kind = target.label.split()
                to_mlflow = f"{p50[target.label] / p50['mlflow json']:.2f}" if mlflow else "-"
                rate, loaded = rates[target.label]
                rate_x = f"{rate / rates['mlflow json'][0]:.1f}" if mlflow else "-"
                timing = (f"{percentile(lane, .5) * 1e3:.3f} | {percentile(run, .5) * 1e3:.3f}"
                          if server in ("default", "redis", "lane") else "- | -")
                print(f"| {server} | {kind} | {p50[target.label] * 1e3:.3f} | {percentile(times, .95) * 1e3:.3f} | "
                      f"{timing} | {p50[target.label] / p50[f'floor {kind}']:.2f} | {to_mlflow} | {rate:.0f} "
                      f"({loaded * 1e3:.2f}) | {rate_x} |")
            for kind in ("npy", "json"):
                verdicts.append((f"{name} {kind}: default hub p50 <= 1.5x the Redis lane's",
                                 p50[f"default {kind}"] / p50[f"redis {kind}"], 1.5))
                verdicts.append((f"{name} {kind}: Redis hub p50 <= 2x the floor's",
                                 p50[f"redis {kind}"] / p50[f"floor {kind}"], 2.0))
                if "lane" in ports:
                    verdicts.append((f"{name} {kind}: web node on the Redis lane p50 <= 2x the floor's",
                                     p50[f"lane {kind}"] / p50[f"floor {kind}"], 2.0))
                if mlflow:
                    verdicts.append((f"{name} {kind}: default hub p50 below MLflow's (json)",
                                     p50[f"default {kind}"] / p50["mlflow json"], 1.0))
                    for server in ("default", "redis", "lane"):
                        if server not in ports:
                            continue
                        verdicts.append((f"{name} {kind}: {server} hub {args.clients}-client req/s >= 2x "
                                         "MLflow's (json)", rates[f"{server} {kind}"][0] / rates["mlflow json"][0],
                                         -2.0))
        print("\n## Issue 39's targets (ratios from this run)\n")
        for what, ratio, limit in verdicts:
            met = ratio >= -limit if limit < 0 else ratio <= limit
            print(f"- {what}: {ratio:.2f}x {'met' if met else 'NOT met'}")
        load = os.getloadavg()
        print(f"\n# load at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; logs in {work}")
    finally:
        stop_all(procs, stack)


if __name__ == "__main__":
    main()
