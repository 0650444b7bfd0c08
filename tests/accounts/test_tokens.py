"""API tokens: the hub_token command, hashing, scopes, revocation."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from hub.accounts.models import ApiToken, hash_token

pytestmark = pytest.mark.django_db


def run_hub_token(*args) -> str:
    out = io.StringIO()
    call_command("hub_token", *args, stdout=out)
    return out.getvalue().strip()


def test_hub_token_creates_user_and_prints_a_working_token():
    raw = run_hub_token("carol", "--create", "--scope", "write")
    token = ApiToken.objects.get(user__username="carol")
    assert raw.startswith("hpcf_") and token.key_hash == hash_token(raw) and raw not in token.key_hash
    assert token.scope == "write"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.post("/api/v1/artifacts/", {"kind": "dataset", "name": "x"}, format="json").status_code == 201


def test_hub_token_needs_create_for_unknown_users():
    with pytest.raises(CommandError):
        run_hub_token("nobody")


def test_read_scope_by_default_and_revocation(owner):
    raw = run_hub_token(owner.username)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/jobs/").status_code == 200
    assert client.post("/api/v1/uploads/", {"size": 1}, format="json").json()["code"] == "insufficient_scope"
    ApiToken.objects.update(revoked=timezone.now())
    response = client.get("/api/v1/artifacts/")
    assert response.status_code == 401 and response.json()["code"] == "invalid_token"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer hpcf_unknown", "Bearer \u00e9\u00e9"])
def test_malformed_or_unknown_tokens_are_401(header):
    response = APIClient().get("/api/v1/artifacts/", HTTP_AUTHORIZATION=header.encode("utf-8").decode("latin-1"))
    assert response.status_code == 401 and response.json()["code"] == "invalid_token"


def test_hub_token_with_a_name_replaces_the_earlier_token_of_that_name(owner):
    """Issue 41, point 7: each run of hub_token added a token; with --name the new one replaces the old."""
    first = run_hub_token(owner.username, "--name", "tour", "--scope", "write")
    other = run_hub_token(owner.username, "--name", "laptop")
    second = run_hub_token(owner.username, "--name", "tour", "--scope", "write")
    active = ApiToken.objects.filter(user=owner, revoked__isnull=True)
    assert sorted(active.values_list("name", flat=True)) == ["laptop", "tour"]
    client = APIClient()
    for raw, status in ((first, 401), (other, 200), (second, 200)):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert client.get("/api/v1/jobs/").status_code == status
    run_hub_token(owner.username)
    run_hub_token(owner.username)  # without --name, tokens are added as before (scripts may hold several)
    assert active.filter(name="hub_token").count() == 2
