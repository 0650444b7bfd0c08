"""Metadata over HTTP: exports of a version in every format, the field table, and linksets."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import patch_vary_headers
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.auth import request_user
from hub.api import OwnMediaType
from hub.errors import HubError, json_error
from hub.metadata import signposting
from hub.metadata.negotiation import Offer, Wanted, choose, choose_offer
from hub.metadata.services import landing_url, record_for, version_record
from hub.registry import services
from hub.registry.access import Viewer
from hub.registry.models import Artifact
from ontology import exports
from ontology.citations import UnknownStyle
from ontology.fields import describe


def export_response(record, name: str, artifact: Artifact, request: HttpRequest | None = None) -> HttpResponse:
    """The export ``name`` of ``record``, with its way back to the landing page (``describes``). Its media
    type is the one the request's ``Accept`` chose (``accepted``); ``citation`` takes a style from
    ``?style=`` or the ``Accept`` header's ``style`` parameter."""
    if name not in exports.FORMATS:
        raise HubError("unsupported_format", f"No export {name!r}; choose one of {', '.join(exports.FORMATS)}.")
    found = exports.FORMATS[name]
    if artifact.kind not in found.kinds:
        kinds = " and ".join(f"{kind}s" for kind in sorted(found.kinds))
        raise HubError("unsupported_format", f"{name} describes {kinds}; {artifact} is a {artifact.kind}.")
    media_type, asked = accepted(request, name) if request is not None else (found.media_type, None)
    style = request.GET.get("style") if request is not None else None
    style = style or (asked.params.get("style") if asked else None)
    try:
        text = exports.export(record, name, style=style)
    except UnknownStyle as exc:
        raise HubError("unknown_style", str(exc))
    profile = found.profile
    # The profile in the type where the type alone does not say it (not DataCite's own types).
    parameters = f'; profile="{profile}"' if profile and "vnd." not in media_type else ""
    charset = "" if media_type.endswith("json") else "; charset=utf-8"
    response = HttpResponse(text, content_type=media_type + parameters + charset)
    if profile:
        response["Content-Profile"] = f"<{profile}>"
    label = getattr(record, "label", "") or ""
    stem = f"{artifact.name}-{label}" if label else artifact.name
    # Shown where the browser can; saved under a name that says what it is (not "bibtex").
    response["Content-Disposition"] = f'inline; filename="{stem}{found.suffix}"'
    response["Link"] = signposting.back_links(record.pid, landing_url(record.pid), "describes")
    patch_vary_headers(response, ["Accept", "Authorization", "Cookie"])  # as the PID that sends clients here
    return response


def accepted(request: HttpRequest, export: str) -> tuple[str, Wanted | None]:
    """The media type export ``export`` answers ``request`` with (its own, or one it ``also`` answers; JSON ones
    also application/json, answered with their own type), and the
    ``Accept`` range that chose it; an ``Accept`` it cannot answer, or a profile it does not conform to, is
    a coded 406."""
    own = exports.FORMATS[export]
    media_type = own.media_type
    accept = request.headers.get("Accept", "").strip()
    if not accept:
        return media_type, None
    offers = [Offer(media_type, own.profile), *(Offer(m) for m in own.also),
              *([Offer("application/json")] if media_type.endswith("json") else [])]
    found = choose_offer(accept, offers)
    if found is None:
        profile = f" (profile {own.profile})" if own.profile else ""
        raise HubError("not_acceptable", f"The {export} export is {media_type}{profile}; ask for that (or */*).")
    offer, asked = found
    return (media_type if offer.media == "application/json" else offer.media), asked


def check_accept(request: Request, export: str) -> None:
    """An export answers its own media type (JSON ones also application/json) and */*; else a coded 406."""
    if export in exports.FORMATS:
        accepted(request, export)


FORMATS_TEXT = ", ".join(name if found.kinds == exports.KINDS else f"{name} ({' and '.join(sorted(found.kinds))})"
                         for name, found in exports.FORMATS.items())  # the API's description: the table's entries


class VersionMetadata(OwnMediaType, APIView):
    """A version's metadata in one of the export formats (``ontology.exports.FORMATS``)."""

    @extend_schema(responses={(200, "*/*"): str},
                   description=f"A version's metadata in one format: {FORMATS_TEXT}. citation takes ?style= (any "
                               "CSL style, e.g. apa, chicago-author-date, ieee, nature; APA by default).")
    def get(self, request: Request, owner: str, name: str, version: str, export: str) -> HttpResponse:
        artifact = services.get_artifact(request.user, owner, name)
        found = services.get_version(artifact, version, allow_deleted=True)  # a tombstone keeps its record
        check_accept(request, export)
        return export_response(version_record(found, Viewer(request.user)), export, artifact, request)


class PidMetadata(OwnMediaType, APIView):
    """The record of any PID in one format (the formats of ``VersionMetadata``): a concept (its versions as
    parts), a version, or a deleted one's tombstone (marked withdrawn). The resolver sends clients here."""

    @extend_schema(responses={(200, "*/*"): str})
    def get(self, request: Request, export: str, pid: str) -> HttpResponse:
        readable = services.readable_pid(request.user, pid)
        if readable is None:
            raise HubError("not_found", f"No record for {pid} (or you may not see it).")
        check_accept(request, export)
        _, artifact, version = readable
        return export_response(record_for(version or artifact, Viewer(request.user)), export, artifact, request)


class MetadataFields(APIView):
    """The metadata fields: what each means, which kinds need it, which the hub derives."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response({"fields": describe()})


def linkset(request: HttpRequest, pid: str) -> HttpResponse:
    """The signposting linkset of a PID's landing page: ``application/linkset+json`` (also for
    ``application/json``), or RFC 9264's text form for ``application/linkset``."""
    user = request_user(request)
    readable = services.readable_pid(user, pid)
    if readable is None:
        return json_error(request, "not_found", f"No landing page for {pid} (or you may not see it).")
    media_type = choose(request.headers.get("Accept", ""), LINKSET_TYPES)
    if media_type is None:
        return json_error(request, "not_acceptable", f"A linkset is {' or '.join(LINKSET_TYPES)}.")
    record = record_for(readable[2] or readable[1], Viewer(user))
    body = signposting.linkset(record, landing_url(record.pid))
    if media_type == "application/linkset":
        response = HttpResponse(signposting.linkset_text(body), content_type=media_type)
    else:
        response = JsonResponse(body, content_type=media_type, json_dumps_params={"indent": 2})
    patch_vary_headers(response, ["Accept", "Authorization", "Cookie"])
    return response


# RFC 9264: the JSON form first (the default), then the text form (the Link header's syntax).
LINKSET_TYPES = ["application/linkset+json", "application/linkset", "application/json"]


def with_collection(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A file download view whose successful answers link back to their version's landing page
    (``collection``) and PID (``cite-as``): FAIR Signposting level 2 for content resources. A file under
    ``latest`` is the concept's (its record lists those URLs): it leads back to the concept's page and PID."""

    @wraps(view)
    def wrapped(request: HttpRequest, owner: str, name: str, version: str, **kwargs: Any) -> HttpResponse:
        response = view(request, owner=owner, name=name, version=version, **kwargs)
        if response.status_code < 400:
            artifact = Artifact.objects.live().filter(owner__username=owner, name=name).first()
            found = (artifact.latest_version() if version == "latest" else
                     artifact.versions.filter(label=version).first()) if artifact else None
            if found is not None:
                pid = artifact.pid if version == "latest" else found.pid
                links = signposting.back_links(pid, landing_url(pid), "collection")
                response["Link"] = f"{response['Link']} , {links}" if response.get("Link") else links
        return response

    return wrapped
