"""One error hierarchy rooted at ``HubError``, built from the hub's coded error answers.

The hub names every error with a code (``X-Error-Code`` header, repeated as ``code`` in the JSON body; see
``hub/errors.py``); ``from_response`` picks the class by that code, then by the HTTP status when a proxy or
an old hub answered without one (as huggingface_hub's ``hf_raise_for_status`` does). Every class below
subclasses the status class that existing ``except`` clauses name (``ValidationError``, ``ConflictError``,
…), so catching by status keeps working.
"""

from __future__ import annotations

import builtins
import warnings
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


# --- by HTTP status ---------------------------------------------------------------------------------


class ValidationError(HubError):
    """The request was refused as invalid (400, 413, 416)."""


class AccessDeniedError(HubError, builtins.PermissionError):
    """Not signed in, or not allowed (401/403). Also a builtin ``PermissionError``, so code that catches
    that (or the deprecated ``hpcfair.PermissionError``) still catches it."""


class StorageQuotaError(AccessDeniedError):
    """Past your storage quota (403 ``storage_quota``): the body's ``used``, ``limit`` and ``adding`` (bytes) say
    by how much; delete versions or abort open uploads, or ask the hub's administrators for more."""


class NotFoundError(HubError):
    """No such thing, or one you may not see (404/410)."""


class ConflictError(HubError):
    """It exists already, or clashes with the hub's state (409), e.g. a duplicate version."""


class RunError(HubError):
    """The model was found but could not be loaded or run (422: ``model_load_failed``, ``run_failed``,
    ``memory_limit``)."""


class RateLimitedError(HubError):
    """Too many requests (429); ``retry_after`` is the seconds the hub asked to wait (0 when it did not say)."""

    retry_after: float = 0.0


class TransferError(HubError):
    """A transfer could not be completed (retries exhausted, or size/sha256 mismatch), or the hub could not
    be reached (``unreachable``)."""


class OfflineError(TransferError):
    """``HPCFAIR_OFFLINE=1`` is set and this needs the hub (it was not asked): code ``offline``."""


class ServerError(HubError):
    """The hub failed or is unavailable (5xx after retries)."""


class JobError(HubError):
    """A job the client waited for failed, was cancelled, or did not finish in time."""


# --- by the hub's error code (each a subclass of its status's class) ----------------------------------


class InvalidMetadataError(ValidationError):
    """The version's metadata does not validate (``invalid_metadata``): ``body["errors"]`` names the fields."""


class InvalidInputsError(ValidationError):
    """The inputs do not fit the model (``invalid_inputs``)."""


class UploadError(ValidationError):
    """An upload did not arrive whole (``upload_incomplete``, ``upload_size_mismatch``,
    ``checksum_mismatch``) or is too large (``upload_too_large``)."""


class AccessRestrictedError(AccessDeniedError):
    """The version's files are restricted or embargoed and you hold no grant: ``hpcfair request-access``
    (the message says how; the body's ``request_access`` is the API path)."""


class NotAuthenticatedError(AccessDeniedError):
    """No token, or one the hub does not accept (``not_authenticated``, ``invalid_token``, ``token_expired``)."""


class InsufficientScopeError(AccessDeniedError):
    """The token is read-only and this writes (``insufficient_scope``)."""


class GoneError(NotFoundError):
    """It was deleted; its PID answers with a tombstone (``gone``)."""


class DuplicateVersionError(ConflictError):
    """Files identical to a version you can see exist already (``duplicate_version``): ``existing_pid``."""

    @property
    def existing_pid(self) -> str:
        return str(self.body.get("existing_pid") or "")


class NotReadyError(ConflictError):
    """The version is not ready for this yet (``not_ready``, ``not_converted``, ``not_runnable``)."""


class NoWorkerError(ServerError):
    """No worker of the device asked for is up (``no_worker``, ``gpu_unavailable``); queue it as a job, or
    try again later."""


class ConfigError(HubError):
    """A task config is wrong: ``key`` names the setting (``device_args.device``), ``line`` its line."""

    def __init__(self, message: str, *, key: str = "", line: int | None = None, file: str = "") -> None:
        where = ", ".join(part for part in (file, f"line {line}" if line else "") if part)
        prefix = f"{key}: " if key else ""
        super().__init__(f"{prefix}{message}" + (f" ({where})" if where else ""), code="invalid_config")
        self.key, self.line, self.file = key, line, file

    def __str__(self) -> str:
        return self.args[0]


BY_CODE: dict[str, type[HubError]] = {
    "invalid_metadata": InvalidMetadataError,
    "invalid_inputs": InvalidInputsError,
    "upload_incomplete": UploadError, "upload_size_mismatch": UploadError, "checksum_mismatch": UploadError,
    "upload_too_large": UploadError,
    "not_authenticated": NotAuthenticatedError, "invalid_token": NotAuthenticatedError,
    "invalid_credentials": NotAuthenticatedError, "token_expired": NotAuthenticatedError,
    "insufficient_scope": InsufficientScopeError, "permission_denied": AccessDeniedError,
    "storage_quota": StorageQuotaError, "access_restricted": AccessRestrictedError,
    "GatedRepo": AccessRestrictedError,
    "not_found": NotFoundError, "gone": GoneError,
    "duplicate_version": DuplicateVersionError,
    "not_ready": NotReadyError, "not_converted": NotReadyError, "not_runnable": NotReadyError,
    "model_load_failed": RunError, "run_failed": RunError, "memory_limit": RunError,
    "model_too_large": RunError,
    "throttled": RateLimitedError, "too_many_attempts": RateLimitedError,
    "no_worker": NoWorkerError, "gpu_unavailable": NoWorkerError,
}
BY_STATUS: dict[int, type[HubError]] = {400: ValidationError, 401: AccessDeniedError, 403: AccessDeniedError,
                                        404: NotFoundError, 409: ConflictError, 410: NotFoundError,
                                        413: ValidationError, 416: ValidationError, 422: RunError,
                                        429: RateLimitedError}


def error_class(code: str, status: int) -> type[HubError]:
    """The class for a code, else for the status (a code the client does not know yet, or none)."""
    if code in BY_CODE:
        return BY_CODE[code]
    return BY_STATUS.get(status, ServerError if status >= 500 else HubError)


def from_response(response) -> HubError:
    """The typed error for an error response (a ``requests.Response``): by its ``X-Error-Code`` header (a
    HEAD or a plain-text answer has no JSON body), else the body's ``code``, else the status."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    code = response.headers.get("X-Error-Code") or body.get("code") or ""
    message = body.get("detail") or _text(response) or f"HTTP {response.status_code} from {response.url}"
    cls = error_class(code, response.status_code)
    error = cls(message, code=code, status=response.status_code,
                request_id=body.get("request_id") or response.headers.get("X-Request-ID"), body=body)
    if isinstance(error, RateLimitedError):
        try:
            error.retry_after = float(response.headers.get("Retry-After") or 0)
        except ValueError:
            pass
    return error


def _text(response) -> str:
    """A short plain-text answer as the message (``Not found: …``); never an HTML page."""
    if not response.headers.get("Content-Type", "").startswith("text/plain"):
        return ""
    try:
        return response.text.strip()[:500]
    except (AttributeError, UnicodeDecodeError):
        return ""


def __getattr__(name: str) -> Any:
    if name == "PermissionError":
        warnings.warn("hpcfair.errors.PermissionError is deprecated: use AccessDeniedError (it shadowed the "
                      "builtin)", DeprecationWarning, stacklevel=2)
        return AccessDeniedError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
