"""The error answers in the OpenAPI schema: every operation lists the 4xx (and 5xx) it can give, each with
the one error body of ``hub.errors`` and its ``X-Error-Code`` header (a drf-spectacular postprocessing hook).

Which statuses an operation can give follows from what it does: every operation checks its input,
authentication and permissions and looks things up (400, 401, 403, 404, 406); writes can conflict, be too
large or of the wrong media type (409, 413, 415); byte ranges can be unsatisfiable (416); operations that
touch the object store or the workers can find them unavailable (503, 504).
"""

from __future__ import annotations

from typing import Any

from hub.errors import STATUS

DESCRIPTIONS = {
    400: "Bad input (malformed, too deeply nested, of the wrong type or range)",
    401: "Not authenticated, or the token is invalid", 403: "Not allowed (scope or permission)",
    404: "No such object, or not visible to you", 405: "Method not allowed", 406: "No acceptable representation",
    409: "Conflict with the current state (already exists, not ready, upload offset)", 410: "Gone",
    413: "The request, a file or an archive inside it is larger than the limit",
    415: "Unsupported media type", 416: "The byte range cannot be satisfied", 422: "The model could not run",
    429: "Too many requests for the client's, the person's or the operation's rate (throttled), too many jobs at "
         "once (too_many_jobs), or too many wrong passwords (too_many_attempts); Retry-After says how long to wait",
    503: "The object store or the workers are unavailable", 504: "The run took too long",
}
# 429: every request counts against a rate (hub.ops.throttles), and a job's start against the person's quota
COMMON = (400, 401, 403, 404, 406, 429)
WRITES = (409, 413, 415)
RUNS = (409, 413, 422, 503, 504)  # paths that reach the workers


def statuses_for(path: str, method: str) -> list[int]:
    """The error statuses ``method path`` can answer."""
    found = set(COMMON)
    if method in ("post", "put", "patch", "delete"):
        found.update(WRITES)
    if any(part in path for part in ("/infer", "/collaborate", "/benchmark", "/convert", "/optimize",
                                     "/container", "/fixity", "/generate")):
        found.update(RUNS)
    if "/files/" in path or "/uploads/" in path:
        found.update((416, 503))
    if "/uploads/" in path:
        found.update((409, 413))
    if "/artifacts/" in path and method == "get":
        found.add(410)  # a deleted artifact's tombstone
    if path.rstrip("/").endswith("/tokens"):
        found.add(429)  # HTTP Basic: sign-in paused after wrong passwords (hub.accounts.throttle)
    return sorted(found)


def error_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["code", "detail"],
        "properties": {
            "code": {"type": "string", "enum": sorted(STATUS), "description": "Machine-readable (hub.errors)"},
            "detail": {"type": "string", "description": "What is wrong, for a person"},
            "request_id": {"type": "string", "nullable": True},
            "errors": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                       "description": "Per field: what is wrong with it"},
        },
        "additionalProperties": True,
    }


def add_error_responses(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: document the error answers of every operation."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = error_schema()
    header = {"X-Error-Code": {"schema": {"type": "string"}, "description": "The body's code"}}
    retry = {**header, "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before "
                                                                                     "asking again"}}
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            if "/artifacts/{owner}/{name}" in path:  # a name the artifact had before a transfer (hub.registry.handover)
                responses.setdefault("308", {
                    "description": "The artifact was transferred: Location is the same request under its new "
                                   "owner/name (method and body kept)",
                    "headers": {"Location": {"schema": {"type": "string"}, "description": "Its new path"}}})
            for status in statuses_for(path, method):
                responses.setdefault(str(status), {
                    "description": DESCRIPTIONS[status], "headers": header if status != 429 else retry,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                })
    return result
