"""Web server start-up: the objects made while starting are kept out of the cycle collector's passes."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys

import pytest
import requests
from django.urls import get_resolver

from hub.runtime import WithoutProcessEnvironment, settle
from hub.web.server import web_command
from tests.conftest import ROOT, wait_for_port
from tests.ports import free_port


@pytest.mark.slow
@pytest.mark.cpu  # starts the hub's start-up in a child: over 1 s on a quiet machine
def test_settle_freezes_what_start_up_made():
    before = gc.get_freeze_count()
    try:
        settle()
        assert gc.get_freeze_count() > before + 1000  # Django, the apps and every view module
        scanned = gc.get_objects()  # what full collections still walk
        resolver = get_resolver()
        assert not any(o is resolver for o in scanned)
        made_after = type("MadeAfter", (), {})()
        assert any(o is made_after for o in gc.get_objects())  # collected as usual
    finally:
        gc.unfreeze()


def test_without_process_environment_drops_the_process_s_variables_only():
    seen = {}

    def app(environ, start_response):
        seen.update(environ)
        return [b""]

    wrapped = WithoutProcessEnvironment(app, {"DATABASE_URL": "postgres://hub:secret@db/hub", "HTTP_PROXY": "http://p:3128",
                                              "HTTP_X_SAME": "same", "SERVER_NAME": "hub.example"})
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "DATABASE_URL": "postgres://hub:secret@db/hub",
               "HTTP_PROXY": "sent by the client", "HTTP_X_SAME": "same", "HTTP_ACCEPT": "*/*",
               "SERVER_NAME": "hub.example"}
    wrapped(environ, lambda status, headers: None)
    assert "DATABASE_URL" not in seen and "HTTP_X_SAME" not in seen
    assert seen["HTTP_PROXY"] == "sent by the client"  # a header the client sent stays
    assert seen["HTTP_ACCEPT"] == "*/*" and seen["PATH_INFO"] == "/"
    assert seen["SERVER_NAME"] == "hub.example"  # describes the request, even if the process has it too


@pytest.mark.slow
@pytest.mark.cpu  # starts granian: out of the fast tier
@pytest.mark.parametrize(("target", "leaks"), [("tests.echo_wsgi:echo", True), ("tests.echo_wsgi:application", False)])
def test_the_web_server_s_environment_stays_out_of_requests(target, leaks):
    """granian copies os.environ into every environ; behind the hub's middleware none of it arrives."""
    port = free_port()
    env = {**os.environ, "HUB_TEST_SERVER_SECRET": "s3cret-value"}
    command = web_command(sys.executable, f"127.0.0.1:{port}", workers=1, app=target)
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, timeout=30, proc=proc)
        response = requests.get(f"http://127.0.0.1:{port}/x?y=1", headers={"X-Probe": "yes"}, timeout=10)
        seen = response.json()
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    assert seen["HTTP_X_PROBE"] == "yes" and seen["PATH_INFO"] == "/x" and seen["QUERY_STRING"] == "y=1"
    assert ("HUB_TEST_SERVER_SECRET" in seen) is leaks  # the first case shows the test can see a leak


@pytest.mark.slow
@pytest.mark.cpu  # kills a process: out of the fast tier
def test_a_child_that_asked_to_die_with_its_parent_goes_when_the_parent_is_killed(tmp_path):
    """As a generation engine does: its worker killed (SIGKILL, no clean-up), the kernel ends it too."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    pid_file = tmp_path / "child.pid"
    child = ("import os, sys, time; sys.path.insert(0, sys.argv[2]); from hub.runtime import die_with_parent; "
             "die_with_parent(); open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)")
    parent = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2], "
              "sys.argv[3]]); time.sleep(60)")
    root = str(Path(__file__).resolve().parent.parent)
    started = subprocess.Popen([sys.executable, "-c", parent, child, str(pid_file), root])
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline, "the child did not start"
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        started.send_signal(signal.SIGKILL)
        started.wait()
        deadline = time.monotonic() + 5
        while _alive(pid):
            assert time.monotonic() < deadline, "the child outlived its killed parent"
            time.sleep(0.05)
    finally:
        started.kill()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper has ended)."""
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
