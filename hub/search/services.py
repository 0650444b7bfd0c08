"""Search: full text with ranking (one text engine per module, ``hub.search.engines``: PostgreSQL's text search,
SQLite's FTS5, ``LIKE`` words), facet filters, and facet counts over the results. Private artifacts appear only
to those who may read them. Filters, counts, access and ordering run over the index's arrays
(``hub.search.index_copy``: a base mapped from the host's disk, and a delta).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hub.errors import HubError
from hub.orgs.models import Role, roles_at_least
from hub.registry.models import Artifact, member_of, shared_with, token_limit
from hub.search import engines, index_copy
from hub.search.models import FACETS, SearchEntry
from ontology.fields import FRAMEWORK_ALIASES

SORTS = ("relevance", "new", "name")
MAX_WORDS = 12
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


DERIVED = ("collapse", "include")


@dataclass
class SearchResult:
    entries: index_copy.Hits  # SearchEntry rows in result order (sliced on demand, with ``artifact`` loaded)
    facets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    suggestion: str = ""  # for a query that found nothing: the same words spelt as the index has them


def search(user, q: str = "", filters: dict[str, list[str]] | None = None, sort: str = "",
           visibility: str = "", with_facets: bool = True, derived: str = "collapse") -> SearchResult:
    """Entries ``user`` may see that match ``q`` and every facet filter (values of one facet are
    alternatives, except keywords, which are tags that must all be present). ``derived``: ``collapse``
    lists what the hub made from an artifact (its MLCube, outputs) under it, ``include`` beside it."""
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
    matcher = engines.matcher(q) if q else None
    sort = sort or ("relevance" if q else "new")
    access = access_of(user)
    hits = index_copy.search(user, access, filters, visibility, matcher, sort, collapse=derived == "collapse")
    suggestion = ""
    if q and not hits.count():
        suggestion = _suggest(q, lambda words: index_copy.search(
            user, access, filters, visibility, engines.matcher(words), sort, collapse=derived == "collapse").count())
    return SearchResult(hits, hits.facet_counts() if with_facets else {}, suggestion)


def derived_under(user, artifact_ids: list[int]) -> dict[int, list[Artifact]]:
    """What the hub made from each of ``artifact_ids`` that ``user`` may see, by parent id."""
    entries = (SearchEntry.objects.filter(parent_id__in=artifact_ids, live=True,
                                          artifact__in=Artifact.objects.live().visible_to(user))
               .select_related("artifact__owner").order_by("artifact__name"))
    out: dict[int, list[Artifact]] = {}
    for entry in entries:
        out.setdefault(entry.parent_id, []).append(entry.artifact)
    return out


def _suggest(q: str, count: Callable[[str], int]) -> str:
    """``q`` with each word the index does not know replaced by the closest one it does (public titles,
    keywords and facet values), if that finds anything; else ''."""
    vocabulary = index_copy.vocabulary()
    words, changed = [], False
    for word in q.split():
        plain = word.strip('"').lower()
        if len(plain) < 4 or not plain.isalpha() or plain in vocabulary:
            words.append(word)
            continue
        near = vocabulary.near(plain)
        one_edit = [w for w in near if _one_edit_apart(plain, w)]  # a typo: a letter wrong, missing, extra or swapped
        close = difflib.get_close_matches(plain, one_edit, n=1, cutoff=0) or \
            difflib.get_close_matches(plain, near, n=1, cutoff=0.8)
        words.append(close[0] if close else word)
        changed |= bool(close)
    suggestion = " ".join(words)
    return suggestion if changed and count(suggestion) else ""


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one letter changed, added, removed, or two neighbours swapped ("irsi", "iris")."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((k for k, (x, y) in enumerate(zip(short, long, strict=False)) if x != y), len(short))
    return short[i:] == long[i + 1:]


def access_of(user) -> index_copy.Access:
    """What ``user`` reads beyond the visibility levels, for the index's arrays: two indexed queries."""
    if user is None or not user.is_authenticated:
        return index_copy.Access.none()

    def ids(rows) -> np.ndarray:
        return np.sort(np.fromiter(rows, dtype=np.int64))
    token = getattr(user, "hub_token", None)
    limit_owner = token.org_id if token is not None and token.artifact_id is None else None
    limit_artifacts = None
    if token is not None and token.artifact_id is not None:
        limit_artifacts = ids(Artifact.objects.filter(token_limit(user)).values_list("pk", flat=True))
    if user.is_superuser:
        empty = index_copy.Access.none()
        return index_copy.Access(empty.shared, empty.orgs_read, empty.orgs_write, limit_owner, limit_artifacts)
    memberships = list(member_of(user, Role.READ).values_list("org_id", "role"))  # one query for both roles
    writes = roles_at_least(Role.WRITE)
    return index_copy.Access(
        shared=ids(shared_with(user).values_list("artifact_id", flat=True)),
        orgs_read=ids(org for org, _ in memberships),
        orgs_write=ids(org for org, role in memberships if role in writes),
        limit_owner=limit_owner, limit_artifacts=limit_artifacts)


