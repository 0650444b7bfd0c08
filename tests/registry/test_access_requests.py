"""Access requests, grants and share links through the real parts: the request -> approve -> download flow over
the REST API, the e-mail of each step delivered to a real SMTP listener on 127.0.0.1 (aiosmtpd), automatic
approval, required fields, expiring and revoked grants, and the owner-only calls refused with codes."""

from __future__ import annotations

import socket
import threading
from datetime import timedelta
from email import message_from_bytes

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from hub.registry import services
from hub.registry.models import AccessPolicy, Grant, Version
from tests.conftest import client_for, staged, valid_metadata

pytestmark = pytest.mark.django_db

SECRET = b"weights-under-a-data-use-agreement"
BASE = "/api/v1/artifacts/alice/dua-model"


class Inbox:
    """What the SMTP listener received: (recipients, message) per mail."""

    def __init__(self) -> None:
        self.mails: list[tuple[list[str], object]] = []
        self.arrived = threading.Condition()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's handler interface
        with self.arrived:
            self.mails.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
            self.arrived.notify_all()
        return "250 OK"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[tuple[list[str], object]]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.mails) >= count, timeout)
        return self.mails


@pytest.fixture
def inbox(settings):
    """A real SMTP server on a free port of 127.0.0.1; the hub sends through Django's SMTP backend to it."""
    handler = Inbox()
    with socket.socket() as probe:  # a free port (aiosmtpd's readiness check cannot use port 0)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    yield handler
    controller.stop()


@pytest.fixture
def gated(owner, tmp_path):
    owner.email = "alice@example.org"
    owner.save()
    artifact = services.create_artifact(owner, kind="model", name="dua-model", title="Under a DUA")
    version = services.create_version(artifact, owner, files=[staged(tmp_path, "m.bin", SECRET)],
                                      metadata=valid_metadata("model"), label="1")
    Version.objects.filter(pk=version.pk).update(files_access="restricted")
    return artifact


@pytest.fixture
def requester(make_user):
    person = make_user("bob")
    person.email = "bob@example.org"
    person.save()
    return person


def test_request_approve_download_with_mail(gated, requester, owner, inbox):
    bob, alice = client_for(requester), client_for(owner)
    refused = bob.get(f"{BASE}/versions/1/files/m.bin")
    assert refused.status_code == 403 and refused["X-Error-Code"] == "access_restricted"
    assert refused.json()["request_access"] == f"{BASE}/access-requests"

    made = bob.post(f"{BASE}/access-requests", {"purpose": "Reproduce table 2"}, format="json")
    assert made.status_code == 201 and made.json()["state"] == "pending"
    to, mail = inbox.wait_for(1)[0]
    assert to == ["alice@example.org"] and "bob asks for the files of alice/dua-model" in mail["Subject"]
    assert "Reproduce table 2" in mail.get_payload()
    again = bob.post(f"{BASE}/access-requests", {"purpose": "Again"}, format="json")
    assert again.status_code == 409 and again["X-Error-Code"] == "conflict"

    # bob may not decide his own request; alice sees it and approves
    pk = made.json()["id"]
    assert bob.post(f"{BASE}/access-requests/{pk}", {"decision": "approve"}, format="json").status_code == 403
    assert [r["requester"] for r in alice.get(f"{BASE}/access-requests").json()] == ["bob"]
    decided = alice.post(f"{BASE}/access-requests/{pk}", {"decision": "approve", "message": "Welcome"},
                         format="json")
    assert decided.status_code == 200 and decided.json()["state"] == "approved"
    to, mail = inbox.wait_for(2)[1]
    assert to == ["bob@example.org"] and "approved" in mail["Subject"] and "Welcome" in mail.get_payload()

    got = bob.get(f"{BASE}/versions/1/files/m.bin")
    assert got.status_code == 200 and b"".join(got.streaming_content) == SECRET
    assert bob.get(f"{BASE}/versions/1/access").json() == {
        "version": "alice/dua-model@1", "files_access": "restricted", "embargo_until": None,
        "may_read_files": True, "granted": True}

    # revoking ends it at once
    grant = bob.get(f"{BASE}/grants/").json()[0]
    assert alice.delete(f"{BASE}/grants/{grant['id']}").status_code == 204
    assert bob.get(f"{BASE}/versions/1/files/m.bin").status_code == 403


def test_required_fields_terms_and_automatic_approval(gated, requester, inbox):
    AccessPolicy.objects.create(artifact=gated, fields=["affiliation"], terms="No redistribution.",
                                auto_approve=True, grant_days=30)
    bob = client_for(requester)
    missing = bob.post(f"{BASE}/access-requests", {"purpose": "Study"}, format="json")
    assert missing.status_code == 400 and missing.json()["missing"] == ["affiliation"]
    unagreed = bob.post(f"{BASE}/access-requests", {"purpose": "Study", "answers": {"affiliation": "ORNL"}},
                        format="json")
    assert unagreed.status_code == 400 and unagreed.json()["missing"] == ["agree_terms"]
    made = bob.post(f"{BASE}/access-requests", {"purpose": "Study", "answers": {"affiliation": "ORNL"},
                                                "agree_terms": True}, format="json")
    assert made.status_code == 201 and made.json()["state"] == "approved"
    grant = Grant.objects.get(artifact=gated, user=requester)
    assert timedelta(days=29) < grant.expires - timezone.now() <= timedelta(days=30)
    to, mail = inbox.wait_for(1)[0]
    assert to == ["bob@example.org"] and "approved" in mail["Subject"]
    assert bob.get(f"{BASE}/versions/1/files/m.bin").status_code == 200


def test_grants_and_share_links_are_the_owners(gated, requester, owner, other):
    bob, alice, mallory, anon = client_for(requester), client_for(owner), client_for(other), client_for(None)
    assert mallory.post(f"{BASE}/grants/", {"user": "mallory"}, format="json").status_code == 403
    assert mallory.post(f"{BASE}/versions/1/share-links/", {}, format="json").status_code == 403
    assert anon.post(f"{BASE}/access-requests", {"purpose": "x"}, format="json")["X-Error-Code"] == \
        "not_authenticated"
    past = alice.post(f"{BASE}/grants/", {"user": "bob", "expires": "2001-01-01T00:00:00Z"}, format="json")
    assert past.status_code == 400
    soon = timezone.now() + timedelta(hours=1)
    made = alice.post(f"{BASE}/grants/", {"user": "bob", "expires": soon.isoformat()}, format="json")
    assert made.status_code == 201 and made.json()["active"]
    assert bob.get(f"{BASE}/versions/1/files/m.bin").status_code == 200
    Grant.objects.filter(pk=made.json()["id"]).update(expires=timezone.now() - timedelta(seconds=1))
    assert bob.get(f"{BASE}/versions/1/files/m.bin").status_code == 403  # expired: no longer

    link = alice.post(f"{BASE}/versions/1/share-links/", {"note": "reviewer 2"}, format="json").json()
    assert link["token"] not in str(alice.get(f"{BASE}/versions/1/share-links/").json())  # shown once
    shared = anon.get(link["url"])
    assert shared.status_code == 200 and shared["Content-Type"] == "application/zip"
    bad = alice.put(f"{BASE}/versions/1/access", {"files_access": "embargoed"}, format="json")
    assert bad.status_code == 400 and "embargo_until" in bad.json()["errors"]
