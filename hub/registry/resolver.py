"""The PID resolver: ``/ark:/{NAAN}/{name}`` and ``/pid/{pid}``.

Content negotiation: HTML gets the landing page (with FAIR signposting ``Link`` headers and an embedded
schema.org record; a tombstone, 410, for deleted versions); ``application/json`` the API record;
``application/ld+json``, ``text/turtle``, ``application/rdf+xml``, ``application/n-triples`` the
metadata graph; ``application/vnd.datacite.datacite+json`` / ``+xml`` DataCite. ``?info`` gets a short
ERC record (ARK convention). Private artifacts answer 404 to anyone who may not read them, exactly as
unknown PIDs do; every representation names sources and derivatives as the reader may see them
(``hub.registry.access``), so answers vary on who asks as well as on ``Accept``.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.utils.safestring import mark_safe

from hub.accounts.auth import request_user
from hub.errors import json_error
from hub.metadata import signposting
from hub.metadata.api import export_response
from hub.metadata.negotiation import choose
from hub.metadata.services import record_for
from hub.registry.access import Viewer
from hub.registry.api.serializers import ArtifactSerializer, VersionSerializer, pid_url
from hub.registry.models import Artifact, Version
from hub.registry.services import readable_pid
from hub.web import landing


def _not_found(request: HttpRequest, pid: str) -> HttpResponse:
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

    data = schema_org(record)
    if data.get("@context") == "https://schema.org/":  # self-contained: harvesters without network parse it too
        data["@context"] = {"@vocab": "https://schema.org/"}
    text = json.dumps(data, indent=2)
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
    user = request_user(request)
    readable = readable_pid(user, pid)
    if readable is None:
        return _not_found(request, pid)
    canonical, artifact, version = readable
    viewer = Viewer(user)
    if "info" in request.GET:
        return HttpResponse(_erc(artifact, version, canonical), content_type="text/plain; charset=utf-8")
    gone = artifact.deleted_at is not None or (version is not None and version.is_deleted)
    media_type = choose(request.headers.get("Accept", ""), list(OFFERED))
    if media_type is None:
        response = json_error(request, "not_acceptable", f"{canonical} is available as: {', '.join(OFFERED)}.")
        response["Vary"] = "Accept"
        return response
    wanted = OFFERED[media_type]
    if wanted is None:
        data = VersionSerializer(version, context={"viewer": viewer}).data if version else \
            ArtifactSerializer(artifact).data
        return _vary(JsonResponse(data, status=410 if gone else 200))
    record = None if gone else record_for(version or artifact, viewer)
    if wanted != "html":
        if record is None:
            return _vary(json_error(request, "gone", f"{canonical} was deleted; only its tombstone page remains."
                                    if gone else f"{canonical} has no published version yet."))
        return _vary(export_response(record, wanted, artifact))
    context = {
        "artifact": artifact,
        "version": version or artifact.latest_version(),
        "is_concept": version is None,
        "pid": canonical,
        "versions": artifact.versions.all(),
        "jsonld": _embedded_jsonld(record) if record else "",
        "record": record,
        "signposts": signposting.links(record) if record else [],
    }
    if gone:
        return _vary(render(request, "registry/tombstone.html", context, status=410))
    response = landing.page(request, viewer, context)
    if record is not None:
        response["Link"] = signposting.link_header(record)
    return _vary(response)


def _vary(response: HttpResponse) -> HttpResponse:
    """Every representation depends on the media type and on who asks (what they may see)."""
    patch_vary_headers(response, ["Accept", "Authorization", "Cookie"])
    return response


def resolve_ark(request: HttpRequest, naan: str, name: str) -> HttpResponse:
    return resolve(request, f"ark:/{naan}/{name}")
