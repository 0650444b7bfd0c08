"""``hpcfair login`` takes ``--endpoint`` and ``--token`` after the command (its own ``--help`` example and
the account page's advice) as well as before it; a command line that does not parse is a one-line error with
the code ``usage``, not click's class name."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcfair.cli", *args], input=stdin, capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


def saved() -> str:
    text = Path(os.environ["HPCFAIR_CONFIG"]).read_text()
    Path(os.environ["HPCFAIR_CONFIG"]).unlink()
    return text


@pytest.mark.slow
@pytest.mark.cpu  # runs the CLI: over 1 s on a quiet machine
@pytest.mark.django_db(transaction=True)
def test_login_takes_endpoint_and_token_before_or_after_the_command(live_server, owner, settings):
    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    url = live_server.url
    _, token = ApiToken.issue(owner, scope="read")
    for args in (["login", "--endpoint", url, "--username", "alice", "--password-stdin"],
                 ["--endpoint", url, "login", "--username", "alice", "--password-stdin"]):
        done = cli(*args, stdin="alice-pw-12345\n")
        assert done.returncode == 0, done.stderr
        assert f"signed in to {url} as alice (write)" in done.stdout
        assert url in saved()
    for args in (["login", "--endpoint", url, "--token", token], ["--endpoint", url, "--token", token, "login"],
                 ["--endpoint", url, "login", "--token", token]):
        done = cli(*args)
        assert done.returncode == 0, done.stderr
        assert "as alice (read)" in done.stdout
        assert token in saved()
    browser = Client()
    browser.force_login(owner)
    advice = re.search(r"<code>(hpcfair login [^<]*)</code>", browser.get("/account/").content.decode()).group(1)
    done = cli(*shlex.split(advice.replace("TOKEN", token))[1:])  # the account page's line, as shown
    assert done.returncode == 0 and "as alice (read)" in done.stdout, done.stderr
    assert token in saved()


@pytest.mark.slow
@pytest.mark.cpu  # runs the CLI: over 1 s on a quiet machine
def test_a_command_line_that_does_not_parse_says_usage():
    wrong = cli("login", "--nope")
    assert wrong.returncode == 2
    assert wrong.stderr.startswith("error [usage]: No such option: --nope")
    assert wrong.stderr.endswith("Try 'hpcfair login --help'.\n") and wrong.stderr.count("\n") == 1
    missing = cli("infer")
    assert missing.returncode == 2 and missing.stderr.startswith("error [usage]: Missing argument 'ref'"), \
        missing.stderr
    assert cli("nosuch").stderr == "error [usage]: No such command 'nosuch'. Try 'hpcfair --help'.\n"
