"""The express path, a WSGI adapter: repeated synchronous ``/infer`` requests answered without Django's
request cycle.

Django's middleware, URL resolving and DRF's view machinery cost about 1.5 ms per request here, half of
the gateway's latency budget (bench/RESULTS.md). So ``Express`` wraps the WSGI application and takes a
request only when the full path has already *granted* it in this generation of the registry: the same
bearer token ran the same model (owner, name, version, file) synchronously and was answered 200. Such a
grant is remembered in ``hub.gateway.memory`` with the generation it was made in, and the channel sends the
request only if that generation is still current, as on the full path. So a revoked
token or a model made private is never acted on by the express path either.

Everything else goes to Django untouched, before any work is sent: a request it has no grant for, bad
input (Django then answers the coded error), ``mode: async``, batch runs over datasets, large inputs, a
stale generation, no worker. After a run was sent, an answer that is not a plain success (a worker error,
a timeout, an overtime run that becomes a job, an output format that does not fit) is handed over: the
request goes to Django with the answer attached (``pipeline.EarlierAnswer``), and the view takes it as the
worker's answer instead of running the model again. So the express path only ever writes the 200 answer;
errors and jobs are Django's alone.

This module is WSGI only: match the path, read the body, parse it (``protocol``), look up the grant
(``memory``), run (``pipeline``), write the answer (``protocol``).
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.http import QueryDict
from django.http.request import split_domain_port, validate_host

from hub.errors import HubError
from hub.gateway import memory, pipeline, protocol
from hub.middleware import request_id_for
from hub.ops import throttles
from hub.ops.counters import REQUESTS

INFER = re.compile(r"^/api/v1/artifacts/(?P<owner>[^/]+)/(?P<name>[^/]+)/versions/(?P<version>[^/]+)/infer$")


def _security_headers() -> list[tuple[str, str]]:
    """The headers Django's middleware adds to an API answer (checked against it by the tests)."""
    headers = [("Allow", "POST, OPTIONS")]
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append(("X-Content-Type-Options", "nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        headers.append(("Referrer-Policy", settings.SECURE_REFERRER_POLICY))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append(("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY))
    headers.append(("X-Frame-Options", settings.X_FRAME_OPTIONS))
    return headers


Answer = tuple[str, list[tuple[str, str]], bytes]


class Express:
    """WSGI middleware: serve granted synchronous ``/infer`` requests, pass everything else to ``app``."""

    def __init__(self, app: Callable) -> None:
        self.app = app
        # HTTPS redirects and HSTS are Django's business: with them configured, every request goes there.
        self.enabled = settings.HUB_GATEWAY_EXPRESS and not (settings.SECURE_SSL_REDIRECT
                                                             or settings.SECURE_HSTS_SECONDS)
        self.headers = _security_headers()

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        match = None
        if self.enabled and environ.get("REQUEST_METHOD") == "POST" and environ.get("HTTP_AUTHORIZATION"):
            match = INFER.match(environ.get("PATH_INFO", ""))
        if match is None:
            return self.app(environ, start_response)
        started = time.perf_counter()
        answer = self.try_answer(environ, match)
        if answer is None:
            return self.app(environ, start_response)
        status, headers, body = answer
        start_response(status, headers)
        REQUESTS.observe("api:version-infer", int(status[:3]), time.perf_counter() - started)  # as Django's would
        REQUESTS.flush(settings.HUB_METRICS_DIR)
        return [body]

    def try_answer(self, environ: dict[str, Any], match: re.Match) -> Answer | None:
        """The 200 answer, or None after putting the body back (and any earlier answer) for Django."""
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return None
        if not 0 < length <= settings.HUB_INFER_MAX_BYTES or not self._host_allowed(environ):
            return None
        body = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(body)  # whatever happens next, Django can read it again
        environ["CONTENT_LENGTH"] = str(len(body))
        if len(body) != length or not match.group(0).isascii():
            return None
        answer = self._run(environ, match, body)
        if isinstance(answer, pipeline.EarlierAnswer):
            environ[pipeline.EARLIER_ANSWER] = answer
            return None
        return answer

    def _run(self, environ: dict[str, Any], match: re.Match, body: bytes) -> Answer | pipeline.EarlierAnswer | None:
        try:
            asked = protocol.InferRequest.parse(_query(environ.get("QUERY_STRING", "")), body,
                                                environ.get("CONTENT_TYPE"), environ.get("HTTP_ACCEPT", ""))
            found = memory.granted(environ["HTTP_AUTHORIZATION"], *match.groups(), asked.file)
            if found is None:
                return None
            generation, model, user_pk = found
            if asked.options.mode == "async" or asked.dataset:
                return None
            arrays = asked.arrays(model)
        except HubError:
            return None  # Django says what is wrong, with its coded error
        if sum(array.nbytes for array in arrays.values()) > settings.HUB_INFER_SYNC_MAX_BYTES:
            return None
        if not throttles.allow_express(user_pk):
            return None  # the person's rate is reached: Django's throttle answers 429 throttled
        environ[throttles.COUNTED] = True  # if Django finishes this request, it is not counted twice
        result = pipeline.run_or_hand_over(model, arrays, asked.options, generation)
        if not isinstance(result, tuple):
            return result  # nothing sent (None), or an answer for Django to finish
        meta, outputs = result
        try:
            content, content_type, extra = protocol.encode_answer(outputs, asked.answer_format, protocol.timings(meta),
                                                                  model)
        except HubError:
            return pipeline.EarlierAnswer(protocol.steps_of([model]), result)
        headers = [("Content-Type", content_type), ("Content-Length", str(len(content))), *extra.items(),
                   *self.headers, ("X-Request-ID", request_id_for(environ.get("HTTP_X_REQUEST_ID", "")))]
        return "200 OK", headers, content

    @staticmethod
    def _host_allowed(environ: dict[str, Any]) -> bool:
        return _host_allowed(environ.get("HTTP_HOST") or environ.get("SERVER_NAME", ""), tuple(settings.ALLOWED_HOSTS))


@lru_cache(maxsize=1)
def _no_query() -> QueryDict:
    return QueryDict("")  # immutable: one for every request without a query string


def _query(text: str) -> QueryDict:
    return QueryDict(text) if text else _no_query()


@lru_cache(maxsize=256)
def _host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Django's own host check, remembered per ``Host`` header (a client sends the same one every time)."""
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)
