"""The web server's command line (``hub.web.server``), as ``hub_serve`` and the benches start it."""

import socket
import subprocess
import sys
import time

import pytest
from django.core.management import CommandError, call_command

from hub.web.server import check_free, web_command
from tests.conftest import ROOT, stop_process, wait_for_port
from tests.ports import free_port


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_command_serves_the_hub_with_granian_on_the_bind_address():
    command = web_command("/venv/bin/python", "127.0.0.1:8123", workers=3, threads=2)
    assert command[:4] == ["/venv/bin/python", "-m", "granian", "--interface"]
    assert option(command, "--interface") == "wsgi"
    assert "hub.wsgi:application" in command
    assert (option(command, "--host"), option(command, "--port")) == ("127.0.0.1", "8123")
    assert (option(command, "--workers"), option(command, "--blocking-threads")) == ("3", "2")
    assert "--access-log" not in command
    assert "--access-log" in web_command("python", "127.0.0.1:8000", 1, access_log=True)


def test_ipv6_bind_address():
    command = web_command("python", "[::1]:8000", 1)
    assert (option(command, "--host"), option(command, "--port")) == ("::1", "8000")


@pytest.mark.parametrize("bind", ["localhost", "127.0.0.1:", ":8000", "127.0.0.1:http"])
def test_bad_bind_address_is_refused(bind):
    with pytest.raises(ValueError, match="host:port"):
        web_command("python", bind, 1)


def test_hub_serve_refuses_a_bad_bind_before_starting_anything(tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    with pytest.raises(CommandError, match="host:port"):
        call_command("hub_serve", "--bind", "localhost")
    assert not settings.VAR_DIR.exists()  # nothing migrated, no process started


def reuse_port_listener(port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as granian binds
    listener.bind(("127.0.0.1", port))
    listener.listen()
    return listener


def test_a_taken_port_stops_hub_serve_before_anything_starts(tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    port = free_port()
    with reuse_port_listener(port):
        with pytest.raises(CommandError, match=f"address already in use: 127.0.0.1:{port}"):
            call_command("hub_serve", "--bind", f"127.0.0.1:{port}")
    assert not settings.VAR_DIR.exists()
    check_free(f"127.0.0.1:{port}")  # free again: nothing is left holding it


@pytest.mark.services
def test_a_port_a_real_granian_serves_is_refused_though_granian_would_share_it(tmp_path):
    """Another granian holds the port: a second granian would start beside it (SO_REUSEPORT) and take half
    the connections; check_free, which hub_serve runs first, says the port is taken."""
    port = free_port()
    other = subprocess.Popen(web_command(sys.executable, f"127.0.0.1:{port}", 1, app="tests.echo_wsgi:application"),
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc=other)
        with pytest.raises(OSError, match="address already in use"):
            check_free(f"127.0.0.1:{port}")
        second = subprocess.Popen(web_command(sys.executable, f"127.0.0.1:{port}", 1,
                                              app="tests.echo_wsgi:application"),
                                  cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(3)
            assert second.poll() is None, "granian refused the port by itself: check_free is no longer needed"
        finally:
            stop_process(second)
    finally:
        stop_process(other)
