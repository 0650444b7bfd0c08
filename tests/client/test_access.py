"""Restricted files through the real clients against a live hub: ``hpcfair request-access`` (a process of its
own), the owner's approval through the library, ``hpcfair show`` and ``hpcfair grants`` naming the grant, the
download that was a typed ``AccessRestrictedError`` before and the bytes after; and ``huggingface_hub`` raising
its own ``GatedRepoError`` on the same restricted file (``X-Error-Code: GatedRepo``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hpcfair import HubClient
from hpcfair.errors import AccessRestrictedError

from hub.accounts.models import ApiToken
from hub.registry import services
from hub.registry.models import Version
from tests.conftest import staged, valid_metadata

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"export-controlled-weights" * 4


def _cli(url: str, token: str, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HPCFAIR_ENDPOINT": url, "HPCFAIR_TOKEN": token, "HOME": str(home),
           "HPCFAIR_CACHE": str(home / "cache")}
    return subprocess.run([sys.executable, "-m", "hpcfair.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.cpu
def test_request_approve_download_through_the_client(live_server, owner, make_user, tmp_path, settings):
    settings.HUB_PUBLIC_URL = live_server.url
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"  # the SMTP path: test_access_requests
    artifact = services.create_artifact(owner, kind="model", name="controlled", title="Export controlled")
    version = services.create_version(artifact, owner, files=[staged(tmp_path, "m.bin", SECRET)],
                                      metadata=valid_metadata("model"), label="1")
    Version.objects.filter(pk=version.pk).update(files_access="restricted")
    bob = make_user("bob")
    _, bob_token = ApiToken.issue(bob, scope="read")
    _, alice_token = ApiToken.issue(owner, scope="write")
    home = tmp_path / "home"
    home.mkdir()

    bob_client = HubClient(live_server.url, bob_token, cache=tmp_path / "bob-cache")
    with pytest.raises(AccessRestrictedError) as refused:
        bob_client.download_file("alice/controlled", "1", "m.bin", tmp_path / "m.bin")
    assert refused.value.status == 403 and "hpcfair request-access alice/controlled" in refused.value.message
    assert not (tmp_path / "m.bin").exists()

    asked = _cli(live_server.url, bob_token, home, "request-access", "alice/controlled", "--purpose",
                 "reproduce figure 3", "--json")
    assert asked.returncode == 0, asked.stderr
    request_id = json.loads(asked.stdout)["id"]
    shown = _cli(live_server.url, bob_token, home, "show", "alice/controlled@1")
    assert "files: restricted; ask with: hpcfair request-access alice/controlled" in shown.stdout, shown.stderr

    alice = HubClient(live_server.url, alice_token, cache=tmp_path / "alice-cache")
    assert [r["requester"] for r in alice.access_requests("alice/controlled")] == ["bob"]
    assert alice.decide_access("alice/controlled", request_id, True, "go ahead")["state"] == "approved"

    shown = _cli(live_server.url, bob_token, home, "show", "alice/controlled@1")
    assert "files: restricted; you may download them (you hold a grant)" in shown.stdout, shown.stderr
    listed = _cli(live_server.url, bob_token, home, "grants", "alice/controlled")
    assert "bob" in listed.stdout and "active" in listed.stdout, listed.stderr
    got = bob_client.download_file("alice/controlled", "1", "m.bin", tmp_path / "m.bin")
    assert got.read_bytes() == SECRET


def test_huggingface_hub_raises_gated_repo_error(live_server, owner, make_user, tmp_path, settings):
    settings.HUB_PUBLIC_URL = live_server.url
    artifact = services.create_artifact(owner, kind="model", name="gated", title="Gated")
    version = services.create_version(artifact, owner, files=[staged(tmp_path, "m.bin", SECRET)],
                                      metadata=valid_metadata("model"), label="1")
    Version.objects.filter(pk=version.pk).update(files_access="restricted")
    _, token = ApiToken.issue(make_user("mallory"), scope="read")
    script = ("import json\nfrom huggingface_hub import hf_hub_download\n"
              "from huggingface_hub.errors import GatedRepoError\n"
              "try:\n    hf_hub_download('alice/gated', 'm.bin', revision='1')\n    print(json.dumps('downloaded'))\n"
              "except GatedRepoError as e:\n    print(json.dumps([type(e).__name__, 'request-access' in str(e)]))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_ENDPOINT=live_server.url, HF_TOKEN=token, HF_HOME=str(tmp_path / "hf"),
               HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["GatedRepoError", True]
