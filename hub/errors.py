"""Machine-readable error codes, mapped to HTTP status in one place.

Every API error body is ``{"code": ..., "detail": ..., "request_id": ...}`` (plus optional fields
such as ``errors`` or ``existing_pid``), and the code is repeated in the ``X-Error-Code`` header.
Unknown exceptions are logged with the request id and answered without their text.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404, HttpRequest, JsonResponse
from hpcfair.compute import CodedError
from rest_framework import exceptions as drf
from rest_framework.response import Response

log = logging.getLogger(__name__)

# code -> HTTP status. The one table; add a code here before raising it.
STATUS: dict[str, int] = {
    "invalid": 400,
    "prompt_too_long": 400,
    "invalid_metadata": 400,
    "malformed_query": 400,
    "query_too_large": 400,
    "malformed_request": 400,
    "invalid_path": 400,
    "invalid_range": 416,
    "invalid_inputs": 400,
    "invalid_mlcube": 400,
    "unsupported_format": 400,
    "unsupported_precision": 400,  # a generation build's precision this hub's CPUs do not run (fp16, bf16)
    "unknown_style": 400,
    "invalid_config": 400,
    "unknown_column": 400,
    "not_trainable": 400,
    "unsupported_dataset": 400,
    "unreadable_dataset": 400,
    "ambiguous_dataset": 400,
    "dataset_too_small": 400,
    "non_numeric_feature": 400,
    "shape_mismatch": 400,  # a fine-tune's variables with different numbers of rows
    "unknown_file": 400,
    # HDF5/NetCDF/Zarr refused by the sandboxed reader (hub.metadata.scientific, hpcfair.scidata)
    "scientific_external": 400,
    "scientific_too_large": 400,
    "scientific_too_many_chunks": 400,
    "scientific_inconsistent": 400,
    "scientific_compression_bomb": 400,
    "scientific_unreadable": 400,
    # GGUF files refused by the sandboxed reader (hub.metadata.gguf, hpcfair.gguf_facts)
    "gguf_invalid": 400,
    "gguf_too_large": 400,
    "upload_incomplete": 400,
    "upload_size_mismatch": 400,
    "checksum_mismatch": 400,
    "upload_too_large": 413,
    # data by reference and fetched data (hub.registry.references, hub.registry.fetch)
    "reference_not_allowed": 403,
    "fetch_not_allowed": 403,
    "reference_changed": 409,
    "not_authenticated": 401,
    "invalid_token": 401,
    "invalid_credentials": 401,
    "token_expired": 401,
    # site sign-in (hub.accounts.oidc): the refusals of a callback that cannot be trusted
    "signin_state": 400,
    "signin_nonce": 400,
    "signin_audience": 400,
    "signin_issuer": 400,
    "signin_expired": 400,
    "signin_refused": 400,
    "signin_off": 404,
    "signin_unavailable": 503,
    # the device authorization grant (RFC 8628 3.5, RFC 6749 5.2): these codes are the RFC's own error names
    "authorization_pending": 400,
    "slow_down": 400,
    "expired_token": 400,
    "access_denied": 400,
    "invalid_grant": 400,
    "invalid_request": 400,
    "invalid_scope": 400,
    "unsupported_grant_type": 400,
    "invalid_client": 401,
    "insufficient_scope": 403,
    "permission_denied": 403,
    "access_restricted": 403,  # a version's files are restricted or embargoed (hub.registry.files_access)
    "csrf_failed": 403,
    "storage_quota": 403,
    "account_not_allowed": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "not_acceptable": 406,
    "conflict": 409,
    "not_runnable": 409,
    "job_final": 409,
    "not_ready": 409,
    "not_converted": 409,
    "already_exists": 409,
    "duplicate_version": 409,
    "upload_offset_mismatch": 409,
    "upload_busy": 409,
    "follows_source": 409,
    "upload_not_open": 409,
    "upload_is_direct": 409,
    "gone": 410,
    "unsupported_media_type": 415,
    "model_load_failed": 422,
    "run_failed": 422,
    "memory_limit": 422,
    "model_too_large": 422,
    "request_too_large": 413,
    "throttled": 429,
    "too_many_attempts": 429,
    "too_many_jobs": 429,
    "too_many_generations": 429,
    "internal_error": 500,
    "storage_unavailable": 503,
    "broker_unavailable": 503,
    "no_worker": 503,
    "query_timeout": 503,
    "query_memory": 503,
    "sparql_busy": 503,
    "gpu_unavailable": 503,
    "unready": 503,
    "worker_timeout": 504,
    # The Hugging Face Hub protocol's own codes (hub.hfhub), spelled as its clients read X-Error-Code
    # (huggingface_hub utils/_http.py hf_raise_for_status): each becomes that client's own exception.
    "RepoNotFound": 404,  # 401 to an anonymous client, as the Hub answers (hub.hfhub.errors)
    "RevisionNotFound": 404,
    "EntryNotFound": 404,
    "GatedRepo": 403,
    # The OCI Distribution specification's codes (hub.oci), as registry clients read them in {"errors": [...]}.
    "BLOB_UNKNOWN": 404,
    "BLOB_UPLOAD_INVALID": 400,
    "BLOB_UPLOAD_UNKNOWN": 404,
    "BLOB_UPLOAD_RANGE": 416,  # a chunk that does not start where the upload stands (the spec's 416)
    "DIGEST_INVALID": 400,
    "MANIFEST_BLOB_UNKNOWN": 404,
    "MANIFEST_INVALID": 400,
    "MANIFEST_UNKNOWN": 404,
    "NAME_INVALID": 400,
    "NAME_UNKNOWN": 404,
    "SIZE_INVALID": 400,
    "UNAUTHORIZED": 401,
    "DENIED": 403,
    "UNSUPPORTED": 405,
    "LENGTH_REQUIRED": 411,  # a chunked body on a server that cannot decode it (Django's development server)
}


# Jobs run by a batch executor (hub.jobs.executors.batch): a task's final state, in Slurm's words -> the job's
# error code and message. The runner's own error (a code above, e.g. invalid_inputs) wins over FAILED. Formatted
# with id, node, time, mem, state and partition.
SLURM_STATES: dict[str, tuple[str, str]] = {
    "FAILED": ("job_failed", "Slurm job {id} failed on node {node} ({state}); its log lines above say why."),
    "TIMEOUT": ("time_limit", "Slurm job {id} ran past its time limit ({time}) on node {node} and was stopped. "
                              "Ask for fewer rows per job, more array tasks (worker_num) or a longer limit."),
    "DEADLINE": ("time_limit", "Slurm job {id} reached its deadline before it could finish and was stopped."),
    "OUT_OF_MEMORY": ("out_of_memory", "Slurm job {id} used more memory than its limit ({mem}) on node {node} and "
                                       "was stopped. Use smaller batches, more array tasks (worker_num) or ask the "
                                       "administrators for a higher limit."),
    "CANCELLED": ("cancelled_by_scheduler", "Slurm job {id} was cancelled outside the hub (by an administrator "
                                            "or the scheduler); nothing it made was kept."),
}
# States of a job lost through no fault of its own: the hub submits it again, up to HUB_JOB_MAX_ATTEMPTS
# (then worker_lost).
SLURM_LOST_STATES = ("NODE_FAIL", "PREEMPTED", "BOOT_FAIL")

class HubError(CodedError):
    """An error a client can act on: a code from ``STATUS``, a message, optional extra fields. A plain coded
    error (``hpcfair.compute.CodedError``): services and jobs raise it without knowing HTTP; the web layer
    (``api_exception_handler``) answers it with ``STATUS[code]``."""

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        if code not in STATUS:
            raise ValueError(f"unknown error code {code!r}: add it to hub.errors.STATUS")
        super().__init__(code, detail)
        self.extra = extra

    @property
    def status_code(self) -> int:
        return STATUS[self.code]

    @property
    def error_code(self) -> str:
        return self.code

    @property
    def message(self) -> str:
        return self.detail


def error_body(code: str, detail: str, request: HttpRequest | None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "detail": detail}
    body.update(extra)
    body["request_id"] = getattr(request, "request_id", None)
    return body


def json_error(request: HttpRequest | None, code: str, detail: str, **extra: Any) -> JsonResponse:
    """A plain Django JSON error response (for views outside DRF)."""
    response = JsonResponse(error_body(code, detail, request, **extra), status=STATUS[code])
    response["X-Error-Code"] = code
    return response


def _flatten(errors: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested validation errors as {"field.sub": ["message", ...]}."""
    out: dict[str, list[str]] = {}
    if isinstance(errors, dict):
        for key, value in errors.items():
            if isinstance(key, int):  # DRF reports list items by index
                out.update(_flatten(value, f"{prefix}[{key}]"))
                continue
            name = key if key != "non_field_errors" else ""
            out.update(_flatten(value, f"{prefix}.{name}" if prefix and name else prefix or name))
    elif isinstance(errors, list) and errors and all(isinstance(e, str) for e in errors):
        out[prefix or "body"] = [str(e) for e in errors]
    elif isinstance(errors, list):
        for index, value in enumerate(errors):
            out.update(_flatten(value, f"{prefix}[{index}]"))
    else:
        out[prefix or "body"] = [str(errors)]
    return out


_DRF_CODES: list[tuple[type[Exception], str]] = [
    (drf.NotAuthenticated, "not_authenticated"),
    (drf.AuthenticationFailed, "invalid_token"),
    (drf.PermissionDenied, "permission_denied"),
    (drf.NotFound, "not_found"),
    (drf.MethodNotAllowed, "method_not_allowed"),
    (drf.NotAcceptable, "not_acceptable"),
    (drf.UnsupportedMediaType, "unsupported_media_type"),
    (drf.ParseError, "malformed_request"),
    (drf.Throttled, "throttled"),
]


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF exception handler: every error becomes a coded body; nothing raw leaks."""
    request = context.get("request")
    extra: dict[str, Any] = {}
    headers: dict[str, str] = {}
    if isinstance(exc, HubError):
        code, detail, extra = exc.error_code, exc.message, exc.extra
    elif isinstance(exc, drf.ValidationError):
        fields = _flatten(exc.detail)
        code = "invalid"
        detail = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items())
        extra = {"errors": fields}
    elif isinstance(exc, Http404):
        code, detail = "not_found", "Not found."
    elif isinstance(exc, RequestDataTooBig):
        code, detail = "request_too_large", ("The request's form fields or body are larger than this hub takes "
                                             f"({settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 2**20:.0f} MiB); "
                                             "send files as uploads.")
    elif isinstance(exc, (TooManyFieldsSent, TooManyFilesSent)):
        code, detail = "malformed_request", "The form has more fields or files than this hub takes in one request."
    elif isinstance(exc, DjangoPermissionDenied):
        code, detail = "permission_denied", "You do not have permission to do this."
    else:
        for cls, mapped in _DRF_CODES:
            if isinstance(exc, cls):
                code, detail = mapped, str(exc.detail)  # type: ignore[attr-defined]
                break
        else:
            log.exception("unhandled error (request %s)", getattr(request, "request_id", "?"))
            code, detail = "internal_error", "Internal error; the administrators can trace it by its request id."
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    if getattr(exc, "wait", None):  # DRF's Throttled, and sign-ins paused (hub.accounts.throttle.LockedOut)
        headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
    if code in ("not_authenticated", "invalid_token", "token_expired"):
        headers.setdefault("WWW-Authenticate", 'Bearer realm="api"')
    elif code == "invalid_credentials":
        headers.setdefault("WWW-Authenticate", 'Basic realm="api"')
    headers["X-Error-Code"] = code
    body = error_body(code, detail, getattr(request, "_request", request), **extra)
    return Response(body, status=STATUS[code], headers=headers)


def data_not_found(request, message: str):
    """For a client that asks for data and not for a page (``Accept: text/turtle``, ``application/ld+json``;
    neither ``text/html`` nor ``*/*``): a 404 in JSON (the API's error) or plain text; None when a page
    is wanted."""
    accept = request.META.get("HTTP_ACCEPT", "").lower()
    if not accept or "html" in accept or "*/*" in accept:
        return None
    if "json" in accept:
        return json_error(request, "not_found", message)
    from django.http import HttpResponseNotFound

    response = HttpResponseNotFound(f"Not found: {message}\n", content_type="text/plain; charset=utf-8")
    response["X-Error-Code"] = "not_found"
    return response
