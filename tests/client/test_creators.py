"""A Hugging Face card has no creators: ``hpcfair upload --creator 'Name, ORCID'`` (repeatable) gives them, and
when they are missing the error says where they go (issue 41, point 12). Run as a terminal user would: the
CLI as a process against a live hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hpcfair import ConfigError
from hpcfair._registry import parse_creator

CARD = ("---\nlicense: mit\npipeline_tag: text-classification\nlibrary_name: pytorch\ntags: [creators-test]\n---\n"
        "# Tiny classifier\n\nA tiny classifier for the creators test.\n")


def test_creator_strings():
    assert parse_creator("Ada Lovelace, 0000-0002-1825-0097") == {"name": "Ada Lovelace",
                                                                  "orcid": "0000-0002-1825-0097"}
    assert parse_creator(" Grace Hopper ") == {"name": "Grace Hopper"}
    assert parse_creator("Lovelace, Ada") == {"name": "Lovelace, Ada"}  # no ORCID iD after the comma
    assert parse_creator("Ada, https://orcid.org/0000-0002-1825-0097")["orcid"].endswith("1825-0097")
    assert parse_creator({"name": "ORNL", "type": "organization"}) == {"name": "ORNL", "type": "organization"}
    with pytest.raises(ConfigError):
        parse_creator("  ")


@pytest.mark.slow
@pytest.mark.cpu
@pytest.mark.django_db(transaction=True)
def test_cli_upload_of_a_hugging_face_card_with_creators(live_server, owner, tmp_path, settings):
    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    _, token = ApiToken.issue(owner, scope="write")
    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": token}
    (tmp_path / "model.pt").write_bytes(b"\x80\x02not really a model" * 10)
    (tmp_path / "README.md").write_text(CARD)

    def upload(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hpcfair.cli", "upload", "tiny", str(tmp_path / "model.pt"),
                               "--metadata", str(tmp_path / "README.md"), *extra], capture_output=True, text=True,
                              env=env, timeout=120)

    missing = upload()
    assert missing.returncode == 1 and missing.stderr.startswith("error [invalid_metadata]:"), missing.stderr
    assert "creators" in missing.stderr and "--creator 'Name, ORCID'" in missing.stderr
    assert "front matter" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1

    done = upload("--creator", "Ada Lovelace, 0000-0002-1825-0097", "--creator", "Grace Hopper", "--json")
    assert done.returncode == 0, done.stderr
    version = json.loads(done.stdout)
    assert version["metadata"]["creators"] == [
        {"name": "Ada Lovelace", "orcid": "https://orcid.org/0000-0002-1825-0097"}, {"name": "Grace Hopper"}]
    assert version["metadata"]["title"] == "Tiny classifier"  # the rest still comes from the card

    (tmp_path / "model.pt").write_bytes(b"\x80\x02another model" * 10)
    wrong = upload("--creator", "Ada Lovelace, 0000-0002-1825-0098", "--version", "2")
    assert wrong.returncode == 1 and "check digit" in wrong.stderr
