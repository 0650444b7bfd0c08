"""Server-rendered pages. The full browsing UI grows here (issue: Web UI)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from hub.registry.models import Artifact


def home(request: HttpRequest) -> HttpResponse:
    visible = Artifact.objects.live().visible_to(request.user).select_related("owner")
    context = {
        "recent": visible[:20],
        "counts": {kind: visible.filter(kind=kind).count() for kind in Artifact.Kind.values},
    }
    return render(request, "web/home.html", context)
