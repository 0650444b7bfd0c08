"""Pages for reading: home (new, popular, counts) and browse (search with facets, sort and paging)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from hub.errors import HubError
from hub.orgs.models import Organization
from hub.registry.models import Artifact
from hub.search.models import FACETS
from hub.search.services import SORTS, derived_under, search

PAGE_SIZE = 20
FACET_LABELS = {"kind": "Kind", "framework": "Framework", "format": "Format", "task": "Task", "license": "License",
                "keyword": "Keyword", "owner": "Owner", "hardware": "Benchmarked on"}
SORT_LABELS = {"relevance": "Best match", "new": "Newest", "name": "Name"}


def site(request: HttpRequest) -> dict[str, Any]:
    """Template context for every page."""
    return {"embedded": settings.HUB_EMBEDDED}


def home(request: HttpRequest) -> HttpResponse:
    everything = search(request.user, sort="new")
    counts = {item["value"]: item["count"] for item in everything.facets["kind"]}
    popular = (Artifact.objects.live().visible_to(request.user).filter(downloads__gt=0)
               .select_related("owner").order_by("-downloads", "-created")[:6])
    context = {
        "counts": {kind: counts.get(kind, 0) for kind in Artifact.Kind.values},
        "recent": everything.entries[:8],
        "popular": popular,
    }
    return render(request, "web/home.html", context)


def browse(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    sort = request.GET.get("sort", "")
    filters = {name: request.GET.getlist(name) for name in FACETS if name in request.GET}
    error = ""
    try:
        result = search(request.user, q=q, filters=filters, sort=sort if sort in SORTS else "")
        entries, facets = result.entries, result.facets
    except HubError as exc:  # a bad facet name in a hand-made URL: say so and show everything
        error, filters = exc.message, {}
        result = search(request.user)
        entries, facets = result.entries, result.facets
    paginator = Paginator(entries, PAGE_SIZE)
    page = paginator.get_page(request.GET.get("page"))
    with_derived(request.user, page)
    suggestion = result.suggestion
    context = {
        "suggestion": suggestion,
        "suggestion_href": "?" + urlencode([("q", suggestion)] + [(k, v) for k, vs in request.GET.lists() for v in vs
                                                                  if k not in {"q", "page"}]) if suggestion else "",
        "q": q, "sort": sort, "error": error, "page": page, "total": paginator.count,
        "facets": _facet_links(request, facets, filters),
        "active": [(FACET_LABELS[name], value, _toggle(request, name, value)) for name, values in filters.items()
                   for value in values if value],
        "sorts": [(key, label) for key, label in SORT_LABELS.items() if key != "relevance" or q],
        "keep": [(k, v) for k, vs in request.GET.lists() for v in vs if k not in {"sort", "page"}],
        "page_query": urlencode([(k, v) for k, vs in request.GET.lists() for v in vs if k != "page"]),
    }
    return render(request, "web/browse.html", context)


def with_derived(user, entries) -> None:
    """Give each search entry ``derived``: what the hub made from its artifact that ``user`` may see."""
    under = derived_under(user, [entry.artifact_id for entry in entries])
    for entry in entries:
        entry.derived = under.get(entry.artifact_id, [])


def _toggle(request: HttpRequest, name: str, value: str) -> str:
    """The browse URL with ``name=value`` added, or removed if present (back to page 1)."""
    params = [(k, v) for k, vs in request.GET.lists() for v in vs if k != "page"]
    if (name, value) in params:
        params.remove((name, value))
    else:
        params.append((name, value))
    return "?" + urlencode(params)


def _facet_links(request: HttpRequest, facets: dict[str, list[dict[str, Any]]], filters: dict[str, list[str]]
                 ) -> list[dict[str, Any]]:
    out = []
    for name in FACETS:
        values = facets.get(name) or []
        if not values:
            continue
        chosen = set(filters.get(name, []))
        out.append({"name": name, "label": FACET_LABELS[name], "values": [
            {"value": v["value"], "count": v["count"], "on": v["value"] in chosen,
             "href": _toggle(request, name, v["value"])} for v in values]})
    return out


def owner(request: HttpRequest, username: str) -> HttpResponse:
    """A person's page: what of theirs the viewer may see, by kind, newest first. 404 when that is nothing
    (whether the account exists is not said)."""
    result = search(request.user, filters={"owner": [username]}, sort="new")
    if not result.total:
        raise Http404("nothing to show")
    page = Paginator(result.entries, PAGE_SIZE).get_page(request.GET.get("page"))
    with_derived(request.user, page)
    counts = {item["value"]: item["count"] for item in result.facets["kind"]}
    is_org = Organization.objects.filter(account__username=username).exists()
    return render(request, "web/owner.html", {"owner": username, "page": page, "total": result.total,
                                              "is_org": is_org,
                                              "counts": [(kind, counts[kind]) for kind in Artifact.Kind.values
                                                         if counts.get(kind)]})
