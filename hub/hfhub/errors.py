"""Errors as the Hub answers them: the hub's coded body (``hub.errors``) plus what ``huggingface_hub`` reads,
``error`` in the body and ``X-Error-Message``. A repository an anonymous client may not see is 401, as on the Hub
(to a signed-in one 404); both carry ``X-Error-Code: RepoNotFound``, so the client raises its own
``RepositoryNotFoundError`` whether the repository is private or missing. A token the hub does not know is 401 with
the Hub's own message for it, so the client says the token is wrong instead of the repository missing."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from hub.errors import api_exception_handler

INVALID_CREDENTIALS = "Invalid credentials in Authorization header"  # huggingface_hub tells this 401 from RepoNotFound


def _header_text(text: str) -> str:
    return " ".join(text.encode("ascii", "replace").decode().split())[:500]


def hf_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    response = api_exception_handler(exc, context)
    code, detail = response["X-Error-Code"], str(response.data.get("detail", ""))
    response.data["error"] = detail
    response["X-Error-Message"] = INVALID_CREDENTIALS if code == "invalid_token" else _header_text(detail)
    if code == "RepoNotFound" and not _signed_in(context.get("request")):
        response.status_code = 401
    return response  # the view adds X-Repo-Commit once the version is known (HfView.finalize_response)


def _signed_in(request) -> bool:
    try:
        return bool(request is not None and request.user.is_authenticated)
    except Exception:  # noqa: BLE001 - a request whose authentication failed is nobody's
        return False
