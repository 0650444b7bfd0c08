"""One progress display for long commands (issue 41, point 10): on a terminal, a hub job's new log lines (one
per epoch of a fine-tuning, a conversion's stages) show once each as ``kind id: message`` above its bar, and
the end says how it went; off a terminal, stderr stays empty and stdout holds the result alone. ``hpcfair
run`` prints lines for every task (``--json`` gives the whole result)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from hpcfair.cli import _task_text
from hpcfair.progress import JobLog

JOB_ID = "5f0c1234-0000-4000-8000-000000000001"
EPOCHS = [f"epoch {n}/3: train loss {1 / n:.3f} | validation loss {1.1 / n:.3f}" for n in (1, 2, 3)]


class Jobs(BaseHTTPRequestHandler):
    """A job that logs one epoch per poll, then succeeds."""

    polls = 0

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        cls = type(self)
        done = min(cls.polls, len(EPOCHS))
        cls.polls += 1
        state = "succeeded" if done == len(EPOCHS) else "running"
        job = {"id": JOB_ID, "kind": "finetune", "state": state, "progress": done / len(EPOCHS),
               "log": [{"time": f"t{n}", "level": "info", "message": m} for n, m in enumerate(EPOCHS[:done])],
               "duration": 4.2 if state == "succeeded" else None, "result": {"pid": "ark:/99999/fk4x"}}
        body = json.dumps(job).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def hub():
    Jobs.polls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Jobs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def wait_command(hub: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "HPCFAIR_ENDPOINT": hub, "HPCFAIR_TOKEN": "x", "COLUMNS": "100"}
    env.pop("HPCFAIR_NO_PROGRESS", None)
    return [sys.executable, "-m", "hpcfair.cli", "jobs", "wait", JOB_ID], env


@pytest.mark.slow
@pytest.mark.cpu  # runs the CLI on a terminal: over 1 s on a quiet machine
def test_on_a_terminal_a_jobs_log_lines_show_once_each(hub):
    command, env = wait_command(hub)
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=terminal, text=True)
    os.close(terminal)
    seen = b""
    while True:  # read the terminal until the command ends
        ready, _, _ = select.select([controller], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(controller, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    os.close(controller)
    shown = seen.decode(errors="replace")
    for epoch in EPOCHS:
        assert shown.count(f"finetune 5f0c1234: {epoch}") == 1, shown
    assert "finetune 5f0c1234: succeeded in 4.2 s" in shown
    assert out.startswith(f"{JOB_ID}  finetune  succeeded  100%") and "epoch" not in out  # stdout: the result


@pytest.mark.slow
@pytest.mark.cpu  # runs the CLI: over 1 s on a quiet machine
def test_off_a_terminal_stderr_is_quiet(hub):
    command, env = wait_command(hub)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith(f"{JOB_ID}  finetune  succeeded")


def test_a_capped_log_shows_only_its_new_lines(monkeypatch):
    shown: list[str] = []
    monkeypatch.setattr("hpcfair.progress.say", lambda what, message: shown.append(f"{what}: {message}"))
    log = JobLog("convert 1234")
    entries = [{"time": str(n), "level": "info", "message": f"line {n}"} for n in range(6)]
    log.show({"log": entries[:3]})
    log.show({"log": entries[1:5]})  # the hub dropped the oldest line and added two
    log.show({"log": entries[1:5]})  # nothing new
    log.show({"log": entries[4:6] + [{"time": "6", "level": "warning", "message": "slow"}]})
    assert shown == [f"convert 1234: line {n}" for n in range(6)] + ["convert 1234: warning: slow"]


def test_run_prints_lines_for_every_task():
    version = {"artifact": "alice/m", "version": "2", "pid": "ark:/99999/fk4a"}
    assert _task_text("upload", version) == "published alice/m@2  ark:/99999/fk4a"
    found = [{"full_name": "alice/m", "kind": "model", "latest_version": "2", "title": "M"}]
    assert _task_text("search", found).split() == ["alice/m", "model", "2", "M"]
    assert _task_text("search", []) == "nothing found"
    container = {"image": "localhost/p:1", "engine": "podman", "output": "$ train\nloss 0.1\n",
                 "export_file": "/tmp/out.txt", "runs": []}
    assert _task_text("container", container) == "image localhost/p:1 (podman)\n$ train\nloss 0.1\nwritten to " \
                                                 "/tmp/out.txt"
    model_cube = {"image": "i", "engine": "podman", "outputs": {"y": np.array([1.5], np.float32)},
                  "export_file": None}
    assert _task_text("container", model_cube) == "image i (podman)\ny [1] float32: [1.5]"
    merged = {"pid": "ark:/99999/fk4b", "version": "alice/a-b-merged@1", "verified": True, "export_file": None}
    assert _task_text("collaboration", merged) == "merged: alice/a-b-merged@1  ark:/99999/fk4b (verified: True)"
    optimized = [{"model": "m", "where": "local", "files": ["/x/m.opt.onnx", "/x/m.int8.onnx"], "report": {}}]
    assert _task_text("optimize", optimized) == "m (local): /x/m.opt.onnx, /x/m.int8.onnx"
    for task, result in (("upload", version), ("search", found), ("container", container),
                         ("collaboration", merged), ("optimize", optimized)):
        assert not _task_text(task, result).lstrip().startswith(("{", "[")), task


def test_a_conversion_not_checked_yet_does_not_print_none():
    """Issue 55: `hpcfair convert … --on-hub` printed "verified: None, max abs difference None"."""
    pending = [{"model": "m", "export_file": "m.onnx", "pid": "ark:/99999/fk4c", "verified": None,
                "max_abs_diff": None}]
    assert _task_text("conversion", pending) == "m: m.onnx (not verified yet: hpcfair show ark:/99999/fk4c tells " \
                                                "when it is)"
    checked = [{**pending[0], "verified": True, "max_abs_diff": 2.5e-07}]
    assert _task_text("conversion", checked) == "m: m.onnx (verified: True, max abs difference 2.5e-07)"
    uploaded = [{**pending[0], "verified": True, "checked_only": True}]  # an uploaded ONNX: the hub's checks
    assert _task_text("conversion", uploaded) == "m: m.onnx (checked on the hub: passed)"
    assert "FAILED" in _task_text("conversion", [{**uploaded[0], "verified": False}])
