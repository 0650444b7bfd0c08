"""``hpcfair upload`` of files identical to a version you can see asks the hub first (``resolve?content=``) and
answers ``duplicate_version`` without sending a byte (issue 41, point 11)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hpcfair import DuplicateVersionError, HubClient

from tests.conftest import valid_metadata


@pytest.mark.slow
@pytest.mark.cpu
@pytest.mark.django_db(transaction=True)
def test_identical_files_are_refused_before_they_are_sent(live_server, owner, tmp_path, settings):
    from hub.accounts.models import ApiToken
    from hub.registry.models import Upload

    settings.HUB_PUBLIC_URL = live_server.url
    _, token = ApiToken.issue(owner, scope="write")
    (tmp_path / "weights.bin").write_bytes(os.urandom(300_000))
    (tmp_path / "meta.yaml").write_text("title: Dup\ndescription: d\ncreators: [{name: A}]\nlicense: MIT\n"
                                        "framework: pytorch\ntask: regression\n")
    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": token}

    def upload(name: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hpcfair.cli", "upload", name, str(tmp_path / "weights.bin"),
                               "--metadata", str(tmp_path / "meta.yaml")], capture_output=True, text=True, env=env,
                              timeout=120)

    first = upload("dup")
    assert first.returncode == 0, first.stderr
    sent = Upload.objects.count()
    for name in ("dup", "dup-elsewhere"):  # the same artifact, or a new one: identical files either way
        again = upload(name)
        assert again.returncode == 1 and again.stderr.startswith("error [duplicate_version]:"), again.stderr
        assert "alice/dup@1" in again.stderr
    assert Upload.objects.count() == sent, "nothing was uploaded"

    client = HubClient(live_server.url, token)
    with pytest.raises(DuplicateVersionError) as duplicate:
        client.publish("dup", {"weights.bin": tmp_path / "weights.bin"}, valid_metadata())
    existing = client.resolve("alice/dup@1")
    assert duplicate.value.existing_pid == existing["pid"] and duplicate.value.status == 409
    reused = client.publish("dup", {"weights.bin": tmp_path / "weights.bin"}, valid_metadata(), reuse_duplicate=True)
    assert reused["pid"] == existing["pid"] and Upload.objects.count() == sent
    (tmp_path / "weights.bin").write_bytes(b"changed")
    assert client.publish("dup", {"weights.bin": tmp_path / "weights.bin"}, valid_metadata())["version"] == "2"
