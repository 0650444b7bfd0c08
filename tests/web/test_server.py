"""The web server's command line (``hub.web.server``), as ``hub_serve`` and the benches start it."""

import pytest
from django.core.management import CommandError, call_command

from hub.web.server import web_command


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
