"""Search, as the pages and the API ask for it: the parameters checked and normalised, then handed to the search
backend (``hub.search.backends``; the default is the mapped index), which answers words, facets, access and order.
"""

from __future__ import annotations

import re

from hub.errors import HubError
from hub.registry.access import Viewer
from hub.registry.models import Artifact
from hub.search.backends import Answer, Query, backend
from hub.search.models import FACETS, SearchEntry
from ontology.fields import FRAMEWORK_ALIASES

SORTS = ("relevance", "new", "name")
MAX_WORDS = 12
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
DERIVED = ("collapse", "include")


def search(user, q: str = "", filters: dict[str, list[str]] | None = None, sort: str = "",
           visibility: str = "", with_facets: bool = True, derived: str = "collapse") -> Answer:
    """Entries ``user`` may see that match ``q`` and every facet filter (values of one facet are
    alternatives, except keywords, which are tags that must all be present), answered by the search backend
    (``hub.search.backends``). ``derived``: ``collapse`` lists what the hub made from an artifact (its MLCube,
    outputs) under it, ``include`` beside it."""
    filters = {name: [v for v in values if v] for name, values in (filters or {}).items()}
    unknown = sorted(set(filters) - set(FACETS))
    if unknown:
        raise HubError("invalid", f"Unknown facet {unknown[0]!r}; facets are {', '.join(FACETS)}.")
    if sort and sort not in SORTS:
        raise HubError("invalid", f"Unknown sort {sort!r}; use one of {', '.join(SORTS)}.")
    if derived not in DERIVED:
        raise HubError("invalid", f"Unknown value {derived!r} for derived; use one of {', '.join(DERIVED)}.")
    filters = {name: [v.lower() for v in values] if name == "keyword" else values
               for name, values in filters.items() if values}
    if "framework" in filters:  # the names the metadata accepts for a framework find it too
        filters["framework"] = [FRAMEWORK_ALIASES.get(v.lower(), v) for v in filters["framework"]]
    q = " ".join(CONTROL.sub(" ", q).split()[:MAX_WORDS])  # PostgreSQL refuses NUL in a string
    query = Query(q, filters, sort or ("relevance" if q else "new"), visibility, with_facets, derived == "collapse")
    return backend().search(query, user)


def derived_under(user, artifact_ids: list[int]) -> dict[int, list[Artifact]]:
    """What the hub made from each of ``artifact_ids`` that ``user`` may see, by parent id. The read rule goes only
    over the few entries found (``Viewer``: public ones without a query): as a subquery of the search it took
    PostgreSQL 10-20 ms to plan for an organization's member at 500k entries (bench/RESULTS.md, issue 60)."""
    entries = list(SearchEntry.objects.filter(parent_id__in=artifact_ids, live=True)
                   .select_related("artifact__owner").order_by("artifact__name"))
    readable = Viewer(user).readable(entry.artifact for entry in entries) if entries else set()
    out: dict[int, list[Artifact]] = {}
    for entry in entries:
        if entry.artifact_id in readable:
            out.setdefault(entry.parent_id, []).append(entry.artifact)
    return out
