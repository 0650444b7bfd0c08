"""The client's errors are typed by the hub's error code (``X-Error-Code``, then the body's ``code``, then the
HTTP status), each a subclass of its status's class, so ``except ConflictError`` keeps working (issue 42).
``hpcfair.PermissionError`` no longer shadows the builtin: it is a deprecated name of ``AccessDeniedError``,
which is also a builtin ``PermissionError``."""

from __future__ import annotations

import builtins
import json
import warnings

import hpcfair
import pytest
import requests
from hpcfair import (
    AccessDeniedError,
    ConflictError,
    DuplicateVersionError,
    HubClient,
    HubError,
    InsufficientScopeError,
    InvalidMetadataError,
    NotAuthenticatedError,
    NotFoundError,
    RateLimitedError,
    ServerError,
    ValidationError,
)
from hpcfair.errors import from_response

from tests.conftest import valid_metadata


def answer(status: int, body: bytes = b"", **headers: str) -> requests.Response:
    response = requests.Response()
    response.status_code, response._content, response.url = status, body, "http://hub.test/api/v1/x"
    response.headers.update(headers)
    return response


def test_the_header_names_the_class_when_there_is_no_json_body():
    # a HEAD answer has no body; a data client's 404 is plain text: the code is in the header only
    error = from_response(answer(409, b"", **{"X-Error-Code": "duplicate_version", "X-Request-ID": "r1"}))
    assert type(error) is DuplicateVersionError and isinstance(error, ConflictError)
    assert (error.code, error.status, error.request_id) == ("duplicate_version", 409, "r1")
    text = from_response(answer(404, b"Not found: ark:/99999/fk4nothing\n",
                                **{"X-Error-Code": "not_found", "Content-Type": "text/plain; charset=utf-8"}))
    assert type(text) is NotFoundError and text.message == "Not found: ark:/99999/fk4nothing"


def test_the_code_wins_over_the_status_and_the_status_is_the_fallback():
    body = json.dumps({"code": "insufficient_scope", "detail": "read-only token", "request_id": "r2"}).encode()
    error = from_response(answer(403, body))  # body code only (no header)
    assert type(error) is InsufficientScopeError and isinstance(error, AccessDeniedError)
    assert str(error) == "read-only token [insufficient_scope, request r2]"
    assert type(from_response(answer(400, b"<html>bad</html>"))) is ValidationError  # a proxy's answer
    assert type(from_response(answer(502, b""))) is ServerError
    unknown = from_response(answer(409, json.dumps({"code": "some_new_code", "detail": "x"}).encode()))
    assert type(unknown) is ConflictError and unknown.code == "some_new_code"  # a newer hub's code
    limited = from_response(answer(429, b"", **{"X-Error-Code": "too_many_attempts", "Retry-After": "30"}))
    assert isinstance(limited, RateLimitedError) and limited.retry_after == 30.0
    throttled = from_response(answer(429, json.dumps({"code": "throttled", "detail": "Try again in 7 s"}).encode(),
                                     **{"X-Error-Code": "throttled", "Retry-After": "7"}))
    assert isinstance(throttled, RateLimitedError) and throttled.retry_after == 7.0
    quota = from_response(answer(403, json.dumps({"code": "storage_quota", "detail": "past", "used": 5, "limit": 4,
                                                  "adding": 2}).encode(), **{"X-Error-Code": "storage_quota"}))
    assert isinstance(quota, hpcfair.StorageQuotaError) and isinstance(quota, AccessDeniedError)
    assert quota.body["used"] == 5 and quota.body["limit"] == 4


def test_permission_error_is_a_deprecated_alias_and_no_longer_shadows_the_builtin():
    with pytest.warns(DeprecationWarning, match="AccessDeniedError"):
        from hpcfair import PermissionError as Old
    assert Old is AccessDeniedError
    with pytest.warns(DeprecationWarning):
        assert hpcfair.errors.PermissionError is AccessDeniedError
    assert "PermissionError" not in hpcfair.__all__  # `import *` leaves the builtin alone
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec("from hpcfair import *", namespace)  # noqa: S102
    assert "PermissionError" not in namespace
    error = NotAuthenticatedError("sign in", code="not_authenticated", status=401)
    assert isinstance(error, builtins.PermissionError) and isinstance(error, HubError)
    with pytest.raises(builtins.PermissionError):  # `except PermissionError` users keep working
        raise error
    assert str(error) == "sign in [not_authenticated]" and error.errno is None


@pytest.mark.django_db(transaction=True)
def test_a_live_hub_answers_typed_errors(live_server, owner, tmp_path, settings):
    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    _, write = ApiToken.issue(owner, scope="write")
    _, read = ApiToken.issue(owner, scope="read")
    client = HubClient(live_server.url, write, cache=tmp_path / "cache")
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\x01" * 100)
    first = client.publish("typed", {"weights.bin": weights}, valid_metadata())

    # the hub's own answer (the client's publish asks before uploading: tests/client/test_duplicate_upload.py)
    body = {"files": [{"path": "weights.bin", "upload": client.upload_file(weights)["id"]}],
            "metadata": valid_metadata()}
    with pytest.raises(DuplicateVersionError) as duplicate:
        client.request("POST", "artifacts/alice/typed/versions/", json=body)
    assert duplicate.value.existing_pid == first["pid"] and duplicate.value.request_id
    other = tmp_path / "other.bin"
    other.write_bytes(b"\x02" * 100)
    with pytest.raises(InvalidMetadataError) as invalid:
        client.publish("typed", {"weights.bin": other}, {"title": "no license"}, version="9")
    assert invalid.value.code == "invalid_metadata" and invalid.value.status == 400
    with pytest.raises(NotFoundError):
        client.resolve("alice/nothing-here@1")
    with pytest.raises(InsufficientScopeError):
        HubClient(live_server.url, read).create_artifact("dataset", "readonly")
    with pytest.raises(NotAuthenticatedError):
        HubClient(live_server.url, "not-a-token").me()
    with pytest.raises(builtins.PermissionError):
        HubClient(live_server.url).create_artifact("dataset", "anonymous")


def test_every_typed_code_is_a_hub_code_and_subclasses_its_status_class():
    from hpcfair.errors import BY_CODE, BY_STATUS

    from hub.errors import STATUS

    assert set(BY_CODE) <= set(STATUS), "a code the hub never sends"
    for code, cls in BY_CODE.items():
        status = STATUS[code]
        assert issubclass(cls, BY_STATUS.get(status, ServerError if status >= 500 else HubError)), code


@pytest.mark.slow
@pytest.mark.cpu  # runs the CLI: over 1 s on a quiet machine
@pytest.mark.django_db(transaction=True)
def test_a_mistyped_model_name_in_a_command_gets_the_hubs_did_you_mean(live_server, owner, tmp_path, settings):
    """Issue 55: ``hpcfair infer demo/iris-clasifier x.npy`` said only that no such file or model exists; the
    hub's nearest name comes along, as ``hpcfair show`` gives it."""
    import os
    import subprocess
    import sys

    import numpy as np

    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    _, token = ApiToken.issue(owner, scope="write")
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\x03" * 100)
    HubClient(live_server.url, token, cache=tmp_path / "cache").publish("iris-classifier", {"weights.bin": weights},
                                                                        valid_metadata())
    np.save(tmp_path / "x.npy", np.zeros((1, 4), dtype="float32"))
    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": token, "HOME": str(tmp_path),
           "HPCFAIR_CACHE": str(tmp_path / "cache")}
    env.pop("HPCFAIR_OFFLINE", None)
    done = subprocess.run([sys.executable, "-m", "hpcfair.cli", "infer", "alice/iris-clasifier", "x.npy"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.startswith("error [invalid_config]"), done.stderr
    assert "the hub has no model alice/iris-clasifier that you can see. Did you mean alice/iris-classifier?" \
        in done.stderr, done.stderr
