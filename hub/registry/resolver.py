"""The PID resolver: ``/ark:/{NAAN}/{name}`` and ``/pid/{pid}``.

The PID URL behaves like a resolver: it answers 303 See Other to the representation content negotiation
chose. HTML goes to the landing page (``/landing/{pid}``: FAIR signposting ``Link`` headers and ``<link>``
elements, an embedded schema.org record; a tombstone, 410, for deleted ones); ``application/json`` to the
API record; ``application/ld+json``, ``text/turtle``, ``application/rdf+xml``, ``application/n-triples``
(the metadata graph) and ``application/vnd.datacite.datacite+json`` / ``+xml`` (DataCite) to the PID's
export (``/api/v1/records/{format}/{pid}``), which a deleted one keeps, marked withdrawn. ``?info`` answers
a short ERC record here (ARK convention). Private artifacts answer 404 to anyone who may not read them, exactly as
unknown PIDs do; every representation names sources and derivatives as the reader may see them
(``hub.registry.access``), so answers vary on who asks as well as on ``Accept``.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseRedirectBase
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.safestring import mark_safe

from hub.accounts.auth import request_user
from hub.errors import data_not_found, json_error
from hub.metadata import signposting
from hub.metadata.negotiation import choose
from hub.metadata.services import landing_url, pid_export_url, record_for
from hub.registry.access import Viewer
from hub.registry.api.serializers import ArtifactSerializer, VersionSerializer, absolute, pid_url
from hub.registry.models import Artifact, Version
from hub.registry.services import readable_pid
from hub.web import landing as landing_page


class SeeOther(HttpResponseRedirectBase):
    """303: what the PID names is not a document; this is a representation of it."""

    status_code = 303


def _not_found(request: HttpRequest, pid: str) -> HttpResponse:
    if (answer := data_not_found(request, f"no artifact or version has the identifier {pid}.")) is not None:
        return answer
    response = render(request, "registry/pid_not_found.html", {"pid": pid}, status=404)
    response["X-Error-Code"] = "not_found"
    return response


# media type -> export format name (None: the API's JSON record). The first is the default.
OFFERED = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/json": None,
    "application/ld+json": "jsonld",
    "text/turtle": "turtle",
    "application/rdf+xml": "rdfxml",
    "application/n-triples": "ntriples",
    "application/vnd.datacite.datacite+json": "datacite-json",
    "application/vnd.datacite.datacite+xml": "datacite-xml",
}


def _embedded_jsonld(record) -> str:
    """The schema.org record for a ``<script type="application/ld+json">``, safe inside HTML."""
    from ontology.exports import schema_org

    text = json.dumps(schema_org(record), indent=2)  # its context is self-contained: it parses offline
    return mark_safe(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))  # noqa: S308


def _erc(artifact: Artifact, version: Version | None, pid: str) -> str:
    """An ARK ``?info`` record in ERC (Electronic Resource Citation) form."""
    subject = version or artifact.latest_version()
    creators = (subject.metadata.get("creators") if subject else None) or [artifact.owner.username]
    names = "; ".join(c.get("name", "") if isinstance(c, dict) else str(c) for c in creators)
    deleted = (version and version.is_deleted) or artifact.deleted_at
    when = (subject.created if subject else artifact.created).date().isoformat()
    lines = [
        "erc:",
        f"who: {names}",
        f"what: {artifact.title or artifact.name}" + (f" (version {version.label})" if version else ""),
        f"when: {when}",
        f"where: {pid_url(pid)}",
        f"how: {artifact.kind}",
        f"pid: {pid}",
        f"status: {'deleted' if deleted else 'active'}",
    ]
    if version is None and subject is not None:
        lines.append(f"latest: {subject.pid}")
    return "\n".join(lines) + "\n"


def resolve(request: HttpRequest, pid: str) -> HttpResponse:
    """The PID as a resolver: ``?info`` answers here; anything else is a 303 to the representation that
    content negotiation chose (the landing page, the API record, or a metadata export)."""
    user = request_user(request)
    readable = readable_pid(user, pid)
    if readable is None:
        return _not_found(request, pid)
    canonical, artifact, version = readable
    if "info" in request.GET:
        return HttpResponse(_erc(artifact, version, canonical), content_type="text/plain; charset=utf-8")
    media_type = choose(request.headers.get("Accept", ""), list(OFFERED))
    if media_type is None:
        response = json_error(request, "not_acceptable", f"{canonical} is available as: {', '.join(OFFERED)}.")
        return _vary(response)
    wanted = OFFERED[media_type]
    gone = artifact.deleted_at is not None or (version is not None and version.is_deleted)
    if wanted == "html":
        target = landing_url(canonical)
    elif wanted is not None:
        target = pid_export_url(canonical, wanted)
    elif gone:  # the API has no URL for a deleted one: its last JSON record answers here
        data = VersionSerializer(version, context={"viewer": Viewer(user)}).data if version else \
            ArtifactSerializer(artifact).data
        return _vary(JsonResponse(data, status=410))
    else:
        owner = artifact.owner.username
        target = absolute(reverse("api:version-detail", args=[owner, artifact.name, version.label]) if version
                          else reverse("api:artifact-detail", args=[owner, artifact.name]))
    response = SeeOther(target)
    response["Link"] = f'<{pid_url(canonical)}> ; rel="cite-as"'
    return _vary(response)


def landing(request: HttpRequest, pid: str) -> HttpResponse:
    """The landing page of a PID (where the resolver sends browsers): the page with its signposts, or the
    tombstone (410) of a deleted one, which keeps its signposts to the withdrawn record."""
    user = request_user(request)
    readable = readable_pid(user, pid)
    if readable is None:
        return _not_found(request, pid)
    canonical, artifact, version = readable
    viewer = Viewer(user)
    gone = artifact.deleted_at is not None or (version is not None and version.is_deleted)
    record = record_for(version or artifact, viewer)
    context = {
        "artifact": artifact,
        "version": version or artifact.latest_version(),
        "is_concept": version is None,
        "pid": canonical,
        "versions": artifact.versions.all(),
        "jsonld": _embedded_jsonld(record),
        "record": record,
        "signposts": signposting.links(record),
    }
    if gone:
        response = render(request, "registry/tombstone.html", context, status=410)
    else:
        response = landing_page.page(request, viewer, context)
    response["Link"] = signposting.link_header(record)
    return _vary(response)


def _vary(response: HttpResponse) -> HttpResponse:
    """Every representation depends on the media type and on who asks (what they may see)."""
    patch_vary_headers(response, ["Accept", "Authorization", "Cookie"])
    return response


def resolve_ark(request: HttpRequest, naan: str, name: str) -> HttpResponse:
    return resolve(request, f"ark:/{naan}/{name}")
