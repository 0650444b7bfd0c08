"""``hpcfair upload NAME FILE --metadata rows.md`` used to publish rows.md as the version's README.md, a file
under a name it does not have. A Markdown metadata file is a card, which the hub reads from README.md: one
named README.md is sent as that file; another is refused, and nothing is published."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

CARD = ("---\ntitle: Big blob\ndescription: A blob of rows.\ncreators: [{name: Ada Lovelace}]\nlicense: MIT\n"
        "---\n# Big blob\n\nRows of numbers.\n")


@pytest.mark.slow
@pytest.mark.cpu  # runs the CLI: over 1 s on a quiet machine
@pytest.mark.django_db(transaction=True)
def test_a_markdown_metadata_file_is_a_card_only_when_named_readme(live_server, owner, tmp_path, settings):
    from hub.accounts.models import ApiToken
    from hub.registry.models import Artifact

    settings.HUB_PUBLIC_URL = live_server.url
    _, token = ApiToken.issue(owner, scope="write")
    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": token}
    (tmp_path / "big.bin").write_bytes(os.urandom(4096))
    (tmp_path / "rows.md").write_text(CARD)
    (tmp_path / "card").mkdir()
    (tmp_path / "card" / "README.md").write_text(CARD)

    def upload(metadata: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hpcfair.cli", "upload", "big-blob", "big.bin", "--kind",
                               "dataset", "--metadata", metadata, "--json"], cwd=tmp_path, capture_output=True,
                              text=True, env=env, timeout=120)

    refused = upload("rows.md")
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.startswith("error [invalid_config]: task_args.metadata: rows.md is Markdown"), refused.stderr
    assert "Name it README.md" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert not Artifact.objects.filter(name="big-blob").exists()

    done = upload("card/README.md")
    assert done.returncode == 0, done.stderr
    version = json.loads(done.stdout)
    assert sorted(f["path"] for f in version["files"]) == ["README.md", "big.bin"]
    assert version["metadata"]["title"] == "Big blob"
