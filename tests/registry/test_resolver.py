"""The PID resolver: landing pages, ?info, JSON, tombstones, privacy."""

from __future__ import annotations

import pytest
from django.test import Client

from hub.registry import pids

pytestmark = pytest.mark.django_db


def jsonld(response) -> str:
    text = response.content.decode()
    start = text.index('<script type="application/ld+json">')
    return text[start:text.index("</script>", start)]


def test_version_and_concept_pids_resolve(owner, publish):
    artifact, first = publish(owner, "m", {"a.bin": b"1"})
    _, second = publish(owner, "m", {"a.bin": b"2"})
    client = Client()
    page = client.get("/" + first.pid, follow=True)
    assert page.status_code == 200 and first.pid.encode() in page.content
    assert page["Content-Type"].startswith("text/html")
    same = client.get("/pid/" + first.pid, follow=True)
    assert same.status_code == 200 and jsonld(same) == jsonld(page)  # the pages differ only in CSRF tokens
    concept = client.get("/" + artifact.pid, follow=True, HTTP_ACCEPT="application/json").json()
    assert concept["latest_version"] == second.label
    info = client.get("/" + artifact.pid + "?info").content.decode()
    assert info.startswith("erc:") and f"latest: {second.pid}" in info and "status: active" in info
    as_json = client.get("/" + first.pid, follow=True, HTTP_ACCEPT="application/json").json()
    assert as_json["pid"] == first.pid and sorted(f["path"] for f in as_json["files"]) == ["README.md", "a.bin"]


def test_pids_never_change(owner, publish):
    artifact, version = publish(owner, "m")
    before = (artifact.pid, version.pid)
    publish(owner, "m", {"b.bin": b"new"})
    artifact.refresh_from_db()
    version.refresh_from_db()
    assert (artifact.pid, version.pid) == before
    assert pids.is_valid(artifact.pid) and pids.is_valid(version.pid)


def test_unknown_and_mistyped_pids_are_404(owner, publish):
    _, version = publish(owner, "m")
    typo = version.pid[:-1] + ("b" if version.pid[-1] != "b" else "c")  # a wrong check character
    assert not pids.is_valid(typo)
    assert Client().get("/" + typo, follow=True).status_code == 404
    assert Client().get("/ark:/99999/fk4nothing").status_code == 404
    assert Client().get("/pid/not-a-pid").status_code == 404


def test_private_pids_are_404_to_others_and_visible_to_the_owner(owner, other, publish):
    artifact, version = publish(owner, "hidden", visibility="private")
    for pid in (artifact.pid, version.pid):
        assert Client().get("/" + pid, follow=True).status_code == 404
        assert Client().get("/" + pid + "?info").status_code == 404
        stranger = Client()
        stranger.force_login(other)
        assert stranger.get("/" + pid, follow=True).status_code == 404
        me = Client()
        me.force_login(owner)
        assert me.get("/" + pid, follow=True).status_code == 200


def test_deleted_artifact_concept_pid_is_a_tombstone(api, owner, publish):
    artifact, version = publish(owner, "gone-soon")
    assert api.delete("/api/v1/artifacts/alice/gone-soon/?reason=superseded").status_code == 204
    for pid in (artifact.pid, version.pid):
        response = Client().get("/" + pid, follow=True)
        assert response.status_code == 410 and b"superseded" in response.content
    assert "status: deleted" in Client().get("/" + version.pid + "?info").content.decode()


def test_a_mistyped_name_gets_a_did_you_mean_but_never_a_private_one(api, owner, other, publish):
    """Issue 55: ``demo/iris-clasifier`` suggests ``demo/iris-classifier``; a private artifact is suggested
    only to those who may see it."""
    from tests.conftest import client_for

    publish(owner, "iris-classifier")
    publish(owner, "secret-forest", visibility="private")
    answer = api.get("/api/v1/resolve", {"ref": f"{owner.username}/iris-clasifier"})
    assert answer.status_code == 404 and answer["X-Error-Code"] == "not_found"
    assert f"Did you mean {owner.username}/iris-classifier?" in answer.json()["detail"]
    assert "Did you mean" in api.get("/api/v1/resolve", {"ref": f"{owner.username}/secret-forrest"}).json()["detail"]
    hidden = client_for(other).get("/api/v1/resolve", {"ref": f"{owner.username}/secret-forrest"}).json()
    assert "Did you mean" not in hidden["detail"] and "secret-forest" not in hidden["detail"]
    far = api.get("/api/v1/resolve", {"ref": f"{owner.username}/completely-else"}).json()
    assert "Did you mean" not in far["detail"]
