"""Where a synchronous request's CPU goes: the hub on the Redis lane against the floor, under load.

    .venv/bin/python bench/infer_cpu.py [--seconds 8] [--clients 4]

One scratch hub as ``bench/infer.py`` sets it up (PostgreSQL, Redis, a Celery worker with its lane
engines, granian with the access log as ``hub_serve`` starts it) and the floor (``bench/floor.py``).
``--clients`` clients send the MLP one row (``.npy``) to each for ``--seconds``; the CPU time each kind
of process used (``/proc``: the web server's workers, the engines, the Celery worker, Redis) is divided
by the requests answered.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import infer as bench  # noqa: E402 - after the path is set


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (children of any of its threads)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += descendants(int(child))
    return found


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kind(pid: int, redis_pid: int) -> str:
    command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    if pid == redis_pid:
        return "redis"
    return next((name for name, mark in (("engine", "hub.gateway.engine"), ("web (granian)", "granian"),
                                         ("celery worker", "celery")) if mark in command), command[:40])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    from hub.web.server import web_command

    procs: list[subprocess.Popen] = []  # the worker, the hub's web server, the floor's
    env, work = bench.scratch_stack("hub-bench-infer-cpu-")
    python = sys.executable
    try:
        token = bench.setup_hub(env, work)
        procs.append(bench.start_worker(env, work))
        port = 16000 + os.getpid() % 1000 * 2
        procs.append(subprocess.Popen(web_command(python, f"127.0.0.1:{port}", 2, access_log=True), cwd=ROOT, env=env,
                                      stdout=open(work / "web.log", "w"), stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen(web_command(python, f"127.0.0.1:{port + 1}", 2, app="bench.floor:app"),
                                      cwd=ROOT, env={**os.environ, "FLOOR_MODELS": f"mlp={work / 'mlp.onnx'}"},
                                      stdout=open(work / "floor.log", "w"), stderr=subprocess.STDOUT))
        bench.wait_port(port)
        bench.wait_port(port + 1)
        bench.wait_worker(env["HUB_BROKER_URL"])
        bench.wait_jobs(env)
        redis_pid = int((Path(os.environ.get("HUB_TEST_RUN_DIR", "/tmp/hpcfair-test-services")) / "redis.pid")
                        .read_text())
        x = np.random.default_rng(0).standard_normal((1, 784)).astype(np.float32)
        body, content_type = bench.request_body("npy", "x", x)
        print(f"# bench/infer_cpu.py {time.strftime('%Y-%m-%d %H:%M')}: MLP one row (.npy), {args.clients} clients "
              f"for {args.seconds:g} s each; load at the start {os.getloadavg()[0]:.2f}")
        print("| server | req/s | CPU per request, by process (µs) |")
        print("|---|---|---|")
        for label, port_of, path, roots in (
                ("hub, Redis lane", port, "/api/v1/artifacts/bench/mlp/versions/latest/infer",
                 [procs[0].pid, procs[1].pid, redis_pid]),
                ("floor", port + 1, "/mlp", [procs[2].pid])):
            target = (port_of, path, token if roots[0] != procs[2].pid else "", body, content_type)
            bench.run_clients(args.clients, *target, 2, 0)  # warm up
            pids = [pid for root in roots for pid in descendants(root)]
            before = {pid: cpu_seconds(pid) for pid in pids}
            times, errors, _, _ = bench.run_clients(args.clients, *target, args.seconds, 0)
            assert not errors, f"{errors} errors; see {work}"
            used: dict[str, float] = {}
            for pid in pids:
                name = kind(pid, redis_pid)
                used[name] = used.get(name, 0.0) + cpu_seconds(pid) - before[pid]
            parts = ", ".join(f"{name} {seconds / len(times) * 1e6:.0f}"
                              for name, seconds in sorted(used.items(), key=lambda item: -item[1]))
            print(f"| {label} | {len(times) / args.seconds:.0f} | {parts} (all: "
                  f"{sum(used.values()) / len(times) * 1e6:.0f}) |")
        print(f"# load at the end {os.getloadavg()[0]:.2f}")
    finally:
        bench.stop_all(procs, env)


if __name__ == "__main__":
    main()
