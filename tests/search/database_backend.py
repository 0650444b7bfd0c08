"""A second search backend, one module, to show that the seam (``hub.search.backends``) holds: it answers from the
database alone, with the read rule's query face (``readable_by``) where the default uses its mask, the facets by
``GROUP BY`` and the words by ``LIKE``. Named by ``HUB_SEARCH_BACKEND`` in tests/search/test_backends.py."""

from __future__ import annotations

from django.db.models import Count, F, Q, QuerySet
from django.db.models.functions import Lower

from hub.registry.models import Artifact
from hub.registry.rule import readable_by
from hub.search.backends import FACET_LIMIT, Answer, Query, SearchBackend
from hub.search.engines.words import match_words
from hub.search.models import FACETS, FacetValue, SearchEntry

ORDER = {"relevance": ("-rank", "-updated", "artifact_id"), "new": ("-updated", "artifact_id"),
         "name": (Lower("title"), "artifact_id")}


class DatabaseBackend(SearchBackend):
    def search(self, query: Query, user) -> Answer:
        readable = Artifact.objects.live().filter(readable_by(user)).values("pk")
        entries = (match_words(query.q) if query.q else SearchEntry.objects.filter(live=True).annotate(rank=F("seq")))
        entries = entries.filter(artifact__in=readable)
        if query.collapse:  # what the hub made from an artifact the reader sees is listed under it
            entries = entries.exclude(parent__in=readable)
        if query.visibility:
            entries = entries.filter(visibility=query.visibility)
        hits = _filtered(entries, query.filters)
        facets = {name: _counts(_filtered(entries, {k: v for k, v in query.filters.items()
                                                    if k != name or name == "keyword"}), name)
                  for name in FACETS} if query.with_facets else {}
        ordered = hits.order_by(*ORDER[query.sort]).select_related("artifact__owner", "version", "current")
        return Answer(ordered, hits.count(), facets)


def _filtered(entries: QuerySet, filters: dict[str, list[str]]) -> QuerySet:
    for name, values in filters.items():
        for group in ([[v] for v in values] if name == "keyword" else [values]):
            entries = entries.filter(Q(pk__in=FacetValue.objects.filter(facet=name, value__in=group).values("entry")))
    return entries


def _counts(entries: QuerySet, name: str) -> list[dict]:
    rows = (FacetValue.objects.filter(facet=name, entry__in=entries.values("pk")).values("value")
            .annotate(count=Count("entry")).order_by("-count", "value")[:FACET_LIMIT])
    return [{"value": row["value"], "count": row["count"]} for row in rows]
