"""Request ids: every response carries ``X-Request-ID``; logs and error bodies name it."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

_VALID_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


def request_id_for(incoming: str) -> str:
    """The client's ``X-Request-ID`` if it is well formed, else a new one."""
    return incoming if _VALID_ID.match(incoming) else os.urandom(16).hex()  # as uuid4().hex, without the object


class RequestIdMiddleware:
    """Take a well-formed ``X-Request-ID`` from the client, or make one."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.request_id = request_id_for(request.headers.get("X-Request-ID", ""))
        response = self.get_response(request)
        response["X-Request-ID"] = request.request_id
        return response
