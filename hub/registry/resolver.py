"""The PID resolver: ``/ark:/{NAAN}/{name}`` and ``/pid/{pid}``.

HTML gets the landing page (a tombstone, 410, for deleted versions); ``application/json`` gets the
API record; ``?info`` gets a short ERC record (ARK convention). Private artifacts answer 404 to
anyone who may not read them, exactly as unknown PIDs do.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from hub.accounts.auth import request_user
from hub.registry import pids
from hub.registry.api.serializers import ArtifactSerializer, VersionSerializer, pid_url
from hub.registry.models import Artifact, Version
from hub.registry.services import pid_lookup


def _not_found(request: HttpRequest, pid: str) -> HttpResponse:
    response = render(request, "registry/pid_not_found.html", {"pid": pid}, status=404)
    response["X-Error-Code"] = "not_found"
    return response


def _wants_json(request: HttpRequest) -> bool:
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


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
    canonical = pids.normalize(pid)
    found = pid_lookup(canonical) if canonical else None
    if found is None:
        return _not_found(request, pid)
    version = found if isinstance(found, Version) else None
    artifact = version.artifact if version else found
    visible = Artifact.objects.visible_to(request_user(request)).filter(pk=artifact.pk).exists()
    if not visible:
        return _not_found(request, pid)
    if "info" in request.GET:
        return HttpResponse(_erc(artifact, version, canonical), content_type="text/plain; charset=utf-8")
    gone = artifact.deleted_at is not None or (version is not None and version.is_deleted)
    if _wants_json(request):
        data = VersionSerializer(version).data if version else ArtifactSerializer(artifact).data
        return JsonResponse(data, status=410 if gone else 200)
    context = {
        "artifact": artifact,
        "version": version or artifact.latest_version(),
        "is_concept": version is None,
        "pid": canonical,
        "versions": artifact.versions.all(),
    }
    if gone:
        return render(request, "registry/tombstone.html", context, status=410)
    return render(request, "registry/landing.html", context)


def resolve_ark(request: HttpRequest, naan: str, name: str) -> HttpResponse:
    return resolve(request, f"ark:/{naan}/{name}")
