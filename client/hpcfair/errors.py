"""One error hierarchy rooted at ``HubError``, built from the hub's coded error bodies."""

from __future__ import annotations

from typing import Any


class HubError(Exception):
    """An error answered by the hub: its ``code``, message, HTTP status and request id."""

    def __init__(self, message: str, *, code: str = "", status: int = 0, request_id: str | None = None,
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.request_id = request_id
        self.body = body or {}

    @property
    def message(self) -> str:
        """The hub's message alone (``str()`` adds the code and the request id)."""
        return str(self.args[0]) if self.args else ""

    def __str__(self) -> str:
        tags = [tag for tag in (self.code, f"request {self.request_id}" if self.request_id else "") if tag]
        return f"{self.message} [{', '.join(tags)}]" if tags else self.message


class ValidationError(HubError):
    """The request was refused as invalid (400)."""


class PermissionError(HubError):  # noqa: A001 - shadows the builtin inside this namespace only
    """Not signed in, or not allowed (401/403)."""


class NotFoundError(HubError):
    """No such thing, or one you may not see (404/410)."""


class ConflictError(HubError):
    """It exists already, or clashes with the hub's state (409), e.g. a duplicate version."""


class TransferError(HubError):
    """A transfer could not be completed (retries exhausted, or size/sha256 mismatch)."""


class ServerError(HubError):
    """The hub failed or is unavailable (5xx after retries)."""


class JobError(HubError):
    """A job the client waited for failed, was cancelled, or did not finish in time."""


class ConfigError(HubError):
    """A task config is wrong: ``key`` names the setting (``device_args.device``), ``line`` its line."""

    def __init__(self, message: str, *, key: str = "", line: int | None = None, file: str = "") -> None:
        where = ", ".join(part for part in (file, f"line {line}" if line else "") if part)
        prefix = f"{key}: " if key else ""
        super().__init__(f"{prefix}{message}" + (f" ({where})" if where else ""), code="invalid_config")
        self.key, self.line, self.file = key, line, file

    def __str__(self) -> str:
        return self.args[0]


_BY_STATUS: dict[int, type[HubError]] = {400: ValidationError, 401: PermissionError, 403: PermissionError,
                                         404: NotFoundError, 409: ConflictError, 410: NotFoundError}


def from_response(response) -> HubError:
    """The typed error for an error response (a ``requests.Response``)."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    code = body.get("code") or response.headers.get("X-Error-Code", "")
    message = body.get("detail") or f"HTTP {response.status_code} from {response.url}"
    cls = _BY_STATUS.get(response.status_code, ServerError if response.status_code >= 500 else HubError)
    return cls(message, code=code, status=response.status_code,
               request_id=body.get("request_id") or response.headers.get("X-Request-ID"), body=body)
