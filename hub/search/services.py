"""Search: full text with ranking (PostgreSQL's text search; word matching elsewhere), facet filters,
and facet counts over the results. Private artifacts appear only to those who may read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import Case, Count, F, IntegerField, Q, QuerySet, Value, When

from hub.errors import HubError
from hub.registry.models import readable_by
from hub.search.models import FACETS, FacetValue, SearchEntry

SORTS = ("relevance", "new", "name")
MAX_WORDS = 12
FACET_LIMIT = 25


@dataclass
class SearchResult:
    entries: QuerySet  # SearchEntry rows in result order, with ``artifact`` loaded
    facets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def visible_entries(user) -> QuerySet:
    """The registry's access rule, applied to the entries' copies of visibility and owner."""
    return SearchEntry.objects.filter(readable_by(user, artifact_field="artifact_id"))


def search(user, q: str = "", filters: dict[str, list[str]] | None = None, sort: str = "",
           visibility: str = "", with_facets: bool = True) -> SearchResult:
    """Entries ``user`` may see that match ``q`` and every facet filter (values of one facet are
    alternatives, except keywords, which are tags that must all be present)."""
    filters = {name: [v for v in values if v] for name, values in (filters or {}).items()}
    unknown = sorted(set(filters) - set(FACETS))
    if unknown:
        raise HubError("invalid", f"Unknown facet {unknown[0]!r}; facets are {', '.join(FACETS)}.")
    if sort and sort not in SORTS:
        raise HubError("invalid", f"Unknown sort {sort!r}; use one of {', '.join(SORTS)}.")
    entries = visible_entries(user)
    if visibility:
        entries = entries.filter(visibility=visibility)
    for name, values in filters.items():
        if not values:
            continue
        groups = [[v] for v in values] if name == "keyword" else [values]
        for group in groups:
            if name == "keyword":
                group = [v.lower() for v in group]
            entries = entries.filter(pk__in=FacetValue.objects.filter(facet=name, value__in=group).values("entry_id"))
    q = " ".join(q.split()[:MAX_WORDS])
    ranked = False
    if q:
        entries, ranked = _match(entries, q), True
    sort = sort or ("relevance" if ranked else "new")
    order = {"relevance": ["-rank", "-updated"] if ranked else ["-updated"], "new": ["-updated"],
             "name": ["title"]}[sort]
    page_rows = entries.select_related("artifact__owner", "version").prefetch_related("artifact__collaborators")
    result = SearchResult(page_rows.order_by(*order, "artifact_id"))
    if with_facets:
        result.facets = facet_counts(entries)
    return result


def _match(entries: QuerySet, q: str) -> QuerySet:
    if connection.vendor == "postgresql" and settings.HUB_SEARCH_ENGINE != "words":
        query = SearchQuery(q, search_type="websearch", config="english")
        return entries.filter(search_vector=query).annotate(rank=SearchRank(F("search_vector"), query))
    return _match_words(entries, q)


def _match_words(entries: QuerySet, q: str) -> QuerySet:
    """The portable fallback (SQLite): every word must occur; title hits weigh 3, keywords 2, text 1."""
    score = Value(0, output_field=IntegerField())
    for word in q.split():
        word = word.strip('"').lstrip("-")
        if not word:
            continue
        entries = entries.filter(Q(title__icontains=word) | Q(keywords__icontains=word) | Q(text__icontains=word))
        score = score + Case(When(title__icontains=word, then=3), default=0) \
            + Case(When(keywords__icontains=word, then=2), default=0) + Case(When(text__icontains=word, then=1),
                                                                             default=0)
    return entries.annotate(rank=score)


def facet_counts(entries: QuerySet) -> dict[str, list[dict[str, Any]]]:
    """For each facet, its most frequent values among ``entries`` with their counts."""
    rows = (FacetValue.objects.filter(entry_id__in=entries.order_by().values("pk"))
            .values("facet", "value").annotate(count=Count("entry_id")).order_by("facet", "-count", "value"))
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in FACETS}
    for row in rows:
        bucket = out.setdefault(row["facet"], [])
        if len(bucket) < FACET_LIMIT:
            bucket.append({"value": row["value"], "count": row["count"]})
    return out
