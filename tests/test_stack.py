"""`make stack`: the hub on the full stack without Docker (scripts/stack.sh). Started on free ports in a
folder of its own, it serves the API, runs two Celery workers, takes a file straight into SeaweedFS by
presigned multipart URLs and gives it back, and Ctrl-C stops the hub and then every service it started."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests
from hpcfair import HubClient

from tests.conftest import ROOT
from tests.ports import free_port, free_ports
from tests.system_packages import require_program

pytestmark = pytest.mark.slow


def descendants(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in out] + [grand for child in out for grand in descendants(int(child))]


def command_line(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def test_make_stack_runs_the_full_stack_and_stops_it(tmp_path):
    folder = Path(tempfile.mkdtemp(prefix="hub-stack-"))  # PostgreSQL's own user must reach it (not tmp_path)
    folder.chmod(0o755)
    for program in ("initdb", "redis-server", "psql", "weed", "pgrep"):
        require_program(program)
    ports = {"HUB_STACK_PG_PORT": free_port(), "HUB_STACK_REDIS_PORT": free_port(), "HUB_STACK_S3_PORT": free_ports(8)}
    web = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "DATABASE_URL"))},
           "HUB_STACK_DIR": str(folder), **{k: str(v) for k, v in ports.items()}}
    log = open(tmp_path / "stack.log", "w")  # noqa: SIM115
    stack = subprocess.Popen([str(ROOT / "scripts" / "stack.sh"), "--bind", f"127.0.0.1:{web}", "--no-demo"],
                             env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{web}"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert stack.poll() is None, (tmp_path / "stack.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the stack did not start"
            try:
                if requests.get(f"{url}/api/v1/artifacts/", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(1)
        started = descendants(stack.pid)
        lines = [command_line(pid) for pid in started]
        assert sum("celery" in line and "worker" in line and "--hostname embedded" in line for line in lines) >= 2
        assert any("weed server" in line for line in lines) or (folder / "s3" / "weed.pid").exists()
        token = subprocess.run(
            [sys.executable, "manage.py", "hub_token", "stacker", "--create", "--scope", "write"], cwd=ROOT,
            env={**env, "DATABASE_URL": f"postgres://postgres@127.0.0.1:{ports['HUB_STACK_PG_PORT']}/hpcfair",
                 # the stack's own var dir and broker (scripts/stack.sh): without them the command's filesystem
                 # broker and cache made var/ in the checkout
                 "HUB_VAR_DIR": str(folder / "var"), "HUB_BROKER_URL": f"redis://127.0.0.1:{ports['HUB_STACK_REDIS_PORT']}/0"},
            capture_output=True, text=True, check=True).stdout.strip()
        client = HubClient(url, token)
        data = os.urandom(3 * 1024 * 1024)
        source = tmp_path / "data.bin"
        source.write_bytes(data)
        opened = client.request("POST", "uploads/", json={"size": len(data), "direct": True}).json()
        assert opened["multipart"]["part_count"] == 1, "the stack's store takes uploads directly"
        done = client.resume_upload(opened["url"], source)
        assert done["sha256"] == hashlib.sha256(data).hexdigest()
        client.create_artifact("dataset", "stacked")
        client.request("POST", "artifacts/stacker/stacked/versions/", json={
            "files": [{"path": "data.bin", "upload": done["id"]}],
            "metadata": {"title": "t", "description": "d", "creators": [{"name": "A"}], "license": "MIT"}})
        answer = client.session.get(client.url("artifacts/stacker/stacked/versions/1/files/data.bin"),
                                    allow_redirects=False)
        assert answer.status_code == 302 and f":{ports['HUB_STACK_S3_PORT'] + 6}/" in answer.headers["Location"]
        assert requests.get(answer.headers["Location"], timeout=30).content == data
        client.close()
    finally:
        serve = [pid for pid in descendants(stack.pid) if "hub_serve" in command_line(pid)]
        for pid in serve:
            os.kill(pid, signal.SIGINT)  # what Ctrl-C does
        stack.wait(timeout=120)
        log.close()
    shutil.rmtree(folder, ignore_errors=True)
    assert stack.returncode == 0, (tmp_path / "stack.log").read_text()[-3000:]
    left = [pid for pid in started if command_line(pid)]
    assert not left, f"still running after the stack stopped: {[command_line(pid) for pid in left]}"
    for name, port in (("PostgreSQL", ports["HUB_STACK_PG_PORT"]), ("Redis", ports["HUB_STACK_REDIS_PORT"]),
                       ("SeaweedFS", ports["HUB_STACK_S3_PORT"] + 6)):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            pytest.fail(f"{name} still listens on {port} after the stack stopped")
