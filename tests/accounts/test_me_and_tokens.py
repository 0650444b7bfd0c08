"""Who am I, tokens made with a password (what ``hpcfair login`` does), and resolving references."""

from __future__ import annotations

import base64

from rest_framework.test import APIClient

from tests.conftest import client_for


def basic(username: str, password: str) -> dict[str, str]:
    raw = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {raw}"}


def test_me_says_who_and_with_which_scope(owner, anon):
    assert anon.get("/api/v1/me").json() == {"authenticated": False, "username": None, "scope": None}
    me = client_for(owner, "read").get("/api/v1/me").json()
    assert (me["authenticated"], me["username"], me["scope"]) == (True, "alice", "read")


def test_tokens_are_made_with_a_password_shown_once_and_revoked(owner):
    owner.set_password("s3cret-pass")
    owner.save()
    web = APIClient()
    made = web.post("/api/v1/tokens/", {"scope": "write", "name": "laptop"}, format="json",
                    **basic("alice", "s3cret-pass"))
    assert made.status_code == 201 and made.json()["token"].startswith("hpcf_")
    token = made.json()["token"]
    user = APIClient(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert user.get("/api/v1/me").json()["scope"] == "write"
    listed = web.get("/api/v1/tokens/", **basic("alice", "s3cret-pass")).json()
    assert [t["name"] for t in listed] == ["laptop"] and "token" not in listed[0]

    refused = user.post("/api/v1/tokens/", {"scope": "write"}, format="json")  # a token cannot mint tokens
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    wrong = web.post("/api/v1/tokens/", {}, format="json", **basic("alice", "wrong"))
    assert wrong.status_code == 401 and wrong.json()["code"] == "invalid_credentials"  # no token was sent
    assert wrong["WWW-Authenticate"] == 'Basic realm="api"' and "password is wrong" in wrong.json()["detail"]
    assert web.post("/api/v1/tokens/", {"scope": "root"}, format="json",
                    **basic("alice", "s3cret-pass")).json()["code"] == "invalid"

    revoked = web.delete(f"/api/v1/tokens/{listed[0]['id']}", **basic("alice", "s3cret-pass"))
    assert revoked.status_code == 204
    assert user.get("/api/v1/me").json()["code"] == "invalid_token"
    assert web.delete(f"/api/v1/tokens/{listed[0]['id']}", **basic("alice", "s3cret-pass")).status_code == 404


def test_resolve_takes_pids_and_names(owner, other, publish, anon):
    _, version = publish(owner, "resolved", {"w.bin": b"resolve me"})
    by_pid = anon.get("/api/v1/resolve", {"ref": version.pid}).json()
    assert (by_pid["artifact"], by_pid["version"]) == ("alice/resolved", version.label)
    assert anon.get("/api/v1/resolve", {"ref": "alice/resolved@latest"}).json()["pid"] == version.pid
    assert anon.get("/api/v1/resolve", {"ref": version.artifact.pid}).json()["pid"] == version.pid  # concept PID
    assert anon.get("/api/v1/resolve").json()["code"] == "invalid"
    assert anon.get("/api/v1/resolve", {"ref": "nonsense"}).json()["code"] == "invalid"
    _, secret = publish(owner, "secret", {"s.bin": b"hidden"}, visibility="private")
    assert client_for(other).get("/api/v1/resolve", {"ref": secret.pid}).json()["code"] == "not_found"
