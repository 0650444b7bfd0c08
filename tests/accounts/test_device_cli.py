"""``hpcfair login`` over the device authorization grant, end to end: the real CLI (a process of its own) against
the live hub, while Chromium signs in at the hub and approves the code it printed; then the saved token is used,
renewed with its refresh token once it has expired, and refused once the sign-in was revoked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

from hub.accounts.models import ApiToken

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcfair.cli", *args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


def test_hpcfair_login_by_the_device_grant_then_refresh(browser, live_server, settings, owner):
    settings.HUB_PUBLIC_URL = live_server.url
    settings.HUB_DEVICE_INTERVAL_S = 1
    settings.HUB_DEVICE_ACCESS_TTL_S = 600
    login = subprocess.Popen([sys.executable, "-m", "hpcfair.cli", "--endpoint", live_server.url, "login"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        first = login.stderr.readline()
        shown = re.search(r"open (\S+) in a browser and enter the code ([A-Z]{4}-[A-Z]{4})", first)
        assert shown and shown.group(1) == f"{live_server.url}/device", first
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{live_server.url}/accounts/login/?next=/device")  # signed in by password, then the code
        page.get_by_label("Username").fill(owner.username)
        page.get_by_label("Password").fill(f"{owner.username}-pw-12345")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{live_server.url}/device")
        time.sleep(2.5)  # the CLI polls meanwhile: authorization_pending, as the RFC says
        page.get_by_label("Code").fill(shown.group(2).lower())
        page.get_by_role("button", name="Approve").click()
        assert "Go back to your terminal" in page.get_by_role("main").inner_text()
        context.close()
        out, err = login.communicate(timeout=60)
    finally:
        if login.poll() is None:
            login.kill()
    assert login.returncode == 0, err
    assert f"signed in to {live_server.url} as {owner.username} (write)" in out
    saved = yaml.safe_load(Path(os.environ["HPCFAIR_CONFIG"]).read_text())
    assert saved["endpoint"] == live_server.url and saved["refresh_token"].startswith("hpcr_")
    assert 500 < saved["expires_at"] - time.time() <= 600
    assert oct(Path(os.environ["HPCFAIR_CONFIG"]).stat().st_mode & 0o777) == "0o600"
    whoami = cli("whoami")
    assert whoami.returncode == 0 and f"{owner.username} on {live_server.url} (token scope write)" in whoami.stdout

    # the access token expires: the hub refuses it, and the client renews it with its refresh token first
    first_token = saved["token"]
    ApiToken.objects.filter(user=owner).update(expires_at=timezone.now() - timedelta(seconds=1))
    Path(os.environ["HPCFAIR_CONFIG"]).write_text(yaml.safe_dump({**saved, "expires_at": int(time.time()) - 1}))
    refused = cli("--token", first_token, "whoami")  # the expired token itself, without the login file's refresh
    assert refused.returncode != 0 and "expired" in refused.stderr and "token_expired" in refused.stderr
    renewed = cli("whoami")
    assert renewed.returncode == 0 and owner.username in renewed.stdout
    again = yaml.safe_load(Path(os.environ["HPCFAIR_CONFIG"]).read_text())
    assert again["token"] != first_token and again["refresh_token"] != saved["refresh_token"]

    # revoking the token on the account page ends the device sign-in: no refresh, a message that says what to do
    ApiToken.objects.filter(user=owner).update(revoked=timezone.now())
    Path(os.environ["HPCFAIR_CONFIG"]).write_text(yaml.safe_dump({**again, "expires_at": int(time.time()) - 1}))
    ended = cli("whoami")
    assert ended.returncode != 0 and "revoked" in ended.stderr, ended.stderr


def test_hpcfair_login_with_a_token_still_saves_it(live_server, settings, owner):
    settings.HUB_PUBLIC_URL = live_server.url
    _, raw = ApiToken.issue(owner, scope="read")
    saved = cli("login", "--endpoint", live_server.url, "--token", raw)
    assert saved.returncode == 0 and "(read)" in saved.stdout
    assert set(yaml.safe_load(Path(os.environ["HPCFAIR_CONFIG"]).read_text())) == {"endpoint", "token"}
