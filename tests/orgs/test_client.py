"""The client against a live hub: ``HubClient``'s organization methods and the ``hpcfair org`` commands, with
refusals as typed errors that keep the hub's message."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hpcfair.client import HubClient
from hpcfair.errors import HubError

from hub.accounts.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.slow
@pytest.mark.cpu  # the CLI in child processes against a live server: about 8 s
def test_organizations_members_and_transfer_through_the_client_and_cli(live_server, owner, collaborator, settings):
    settings.HUB_PUBLIC_URL = live_server.url
    _, alice_token = ApiToken.issue(owner, scope="admin")
    _, bob_token = ApiToken.issue(collaborator, scope="admin")
    alice, bob = HubClient(live_server.url, alice_token), HubClient(live_server.url, bob_token)
    assert alice.create_org("lab", title="The Lab")["name"] == "lab"
    assert alice.set_member("lab", "bob", "write")["role"] == "write"
    assert [(o["name"], o["role"]) for o in bob.orgs(mine=True)] == [("lab", "write")]
    assert [m["username"] for m in bob.org_members("lab")] == ["alice", "bob"]
    with pytest.raises(HubError) as refused:
        bob.set_member("lab", "bob", "admin")
    assert refused.value.code == "permission_denied" and "ask an admin of lab: alice" in str(refused.value)
    with pytest.raises(HubError) as last:
        alice.remove_member("lab", "alice")
    assert last.value.code == "conflict" and "last admin" in str(last.value)
    alice.create_artifact("model", "net")
    assert alice.transfer_artifact("alice/net", "lab")["full_name"] == "lab/net"
    assert bob.artifact("lab/net")["owner"] == "lab"

    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": alice_token}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hpcfair.cli", *args], capture_output=True, text=True, env=env,
                              timeout=120)
    made = cli("org", "create", "physics", "--title", "Physics")
    assert made.returncode == 0 and "created physics; you are its admin" in made.stdout, made.stderr
    added = cli("org", "add", "physics", "bob", "--role", "read")
    assert added.returncode == 0 and "bob is a member of physics with the read role" in added.stdout
    shown = cli("org", "show", "physics")
    assert "your role: admin" in shown.stdout and "bob" in shown.stdout and "read" in shown.stdout
    assert "physics" in cli("org", "list", "--mine").stdout
    bad = cli("org", "add", "physics", "bob", "--role", "owner")
    assert bad.returncode == 1 and bad.stderr.startswith("error [invalid]:"), bad.stderr
    assert cli("org", "remove", "physics", "bob").returncode == 0
    moved = cli("transfer", "lab/net", "physics")
    assert moved.returncode == 0 and "lab/net is now physics/net" in moved.stdout, moved.stderr
