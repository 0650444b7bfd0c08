"""A request body of unknown length: container clients send a compressed layer as ``Transfer-Encoding: chunked``
with no ``Content-Length`` (containers/image's ``PATCH``), which Django reads as empty. A server that decodes it
says so (``wsgi.input_terminated``: granian, the hub's server, and gunicorn) and its input is read to the end; on
one that does not (Django's development server) such a body is refused with a coded 411."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest

from hub.oci.errors import OciError


def reader(request: HttpRequest) -> Callable[[int], bytes]:
    """``read(n)`` over the body of ``request``, whether it has a length or is chunked."""
    meta = request.META
    if meta.get("CONTENT_LENGTH") or "chunked" not in meta.get("HTTP_TRANSFER_ENCODING", "").lower():
        return request.read
    if meta.get("wsgi.input_terminated"):
        return meta["wsgi.input"].read
    raise OciError("LENGTH_REQUIRED", "This server cannot read a chunked request body: send Content-Length, or "
                                      "serve the hub with its own server (manage.py hub_serve, granian).")
