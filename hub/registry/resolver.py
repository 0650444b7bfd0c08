"""The PID resolver: ``/ark:/{NAAN}/{name}`` and ``/pid/{pid}``.

The PID URL behaves like a resolver: it answers 303 See Other to the representation content negotiation
chose. HTML and XHTML go to the landing page (``/landing/{pid}``: FAIR signposting ``Link`` headers and
``<link>`` elements, an embedded schema.org record; a tombstone, 410, for deleted ones); ``application/json``
to the API record; the linkset types to ``/linkset/{pid}``; every export's media type (``offers``: the
metadata graph, DataCite, the Croissant and schema.org profiles of JSON-LD, BibTeX, CSL-JSON, RIS, and
formatted references as ``text/x-bibliography`` with a ``style``) to the PID's export
(``/api/v1/records/{format}/{pid}``), which a deleted one keeps, marked withdrawn. ``?info`` answers
a short ERC record here (ARK convention). Private artifacts answer 404 to anyone who may not read them, exactly as
unknown PIDs do; every representation names sources and derivatives as the reader may see them
(``hub.registry.access``), so answers vary on who asks as well as on ``Accept``.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseRedirectBase
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers

from hub.accounts.auth import request_user
from hub.errors import data_not_found, json_error
from hub.metadata import signposting
from hub.metadata.negotiation import Offer, choose_offer
from hub.metadata.services import landing_url, pid_export_url
from hub.registry.access import Viewer
from hub.registry.api.serializers import ArtifactSerializer, VersionSerializer, absolute, pid_url
from hub.registry.models import Artifact, Version
from hub.registry.services import readable_pid
from ontology.citations import UnknownStyle, style_name
from ontology.exports import FORMATS, names_for


class SeeOther(HttpResponseRedirectBase):
    """303: what the PID names is not a document; this is a representation of it."""

    status_code = 303


def not_found(request: HttpRequest, pid: str) -> HttpResponse:
    if (answer := data_not_found(request, f"no artifact or version has the identifier {pid}.")) is not None:
        return answer
    response = render(request, "registry/pid_not_found.html", {"pid": pid}, status=404)
    response["X-Error-Code"] = "not_found"
    return response


# What the PID offers besides its exports (``ontology.exports.names_for``), first the default:
# (media type, profile) -> what answers it (None: the API's JSON record).
PAGES = [
    (Offer("text/html"), "html"),
    (Offer("application/xhtml+xml"), "html"),  # the landing page answers it as XHTML
    (Offer("application/json"), None),
]
LINKSETS = [(Offer("application/linkset+json"), "linkset"), (Offer("application/linkset"), "linkset")]


def offers(kind: str) -> list[tuple[Offer, str | None]]:
    """Every (media type, profile) a PID of ``kind`` answers, and what answers it. JSON-LD without a profile
    is the metadata graph; with the Croissant (datasets) or schema.org profile, that document."""
    exported = [(Offer(FORMATS[name].media_type, FORMATS[name].profile), name) for name in names_for(kind)]
    # and the types an export also answers: a formatted reference as DOI resolvers answer text/x-bibliography
    also = [(Offer(media), name) for name in names_for(kind) for media in FORMATS[name].also]
    return [*PAGES, *exported, *LINKSETS, *also]


def _described(offered: list[tuple[Offer, str | None]]) -> str:
    return ", ".join(offer.media + (f' (profile "{offer.profile}")' if offer.profile else "") for offer, _ in offered)


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
        return not_found(request, pid)
    canonical, artifact, version = readable
    if "info" in request.GET:
        return HttpResponse(_erc(artifact, version, canonical), content_type="text/plain; charset=utf-8")
    offered = offers(artifact.kind)
    found = choose_offer(request.headers.get("Accept", ""), [offer for offer, _ in offered])
    if found is None:
        response = json_error(request, "not_acceptable", f"{canonical} is available as: {_described(offered)}.")
        return vary(response)
    offer, asked = found
    wanted = next(name for o, name in offered if o == offer)
    gone = artifact.deleted_at is not None or (version is not None and version.is_deleted)
    if wanted == "html":
        target = landing_url(canonical)
    elif wanted == "linkset":
        target = signposting.linkset_url(canonical)
    elif wanted == "citation":
        try:
            style = style_name(asked.params["style"]) if asked.params.get("style") else ""
        except UnknownStyle as exc:
            return vary(json_error(request, "not_acceptable", str(exc)))
        target = pid_export_url(canonical, wanted) + (f"?style={style}" if style else "")
    elif wanted is not None:
        target = pid_export_url(canonical, wanted)
    elif gone:  # the API has no URL for a deleted one: its last JSON record answers here
        data = VersionSerializer(version, context={"viewer": Viewer(user)}).data if version else \
            ArtifactSerializer(artifact).data
        return vary(JsonResponse(data, status=410))
    else:
        owner = artifact.owner.username
        target = absolute(reverse("api:version-detail", args=[owner, artifact.name, version.label]) if version
                          else reverse("api:artifact-detail", args=[owner, artifact.name]))
    response = SeeOther(target)
    response["Link"] = f'<{pid_url(canonical)}> ; rel="cite-as"'
    return vary(response)


def vary(response: HttpResponse) -> HttpResponse:
    """Every representation depends on the media type and on who asks (what they may see)."""
    patch_vary_headers(response, ["Accept", "Authorization", "Cookie"])
    return response


def resolve_ark(request: HttpRequest, naan: str, name: str) -> HttpResponse:
    return resolve(request, f"ark:/{naan}/{name}")
