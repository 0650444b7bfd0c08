"""The search seam, one level above the words (as NetBox's ``SearchBackend``): a backend is handed the query
(words, facet filters, visibility, order) and the person reading, and answers the
hits in order, their total, the facet counts and a spelling suggestion, so that another engine (OpenSearch for a
federation) answers access and facets too. ``HUB_SEARCH_BACKEND`` names the class; the default is the mapped
index (``hub.search.backends.index``). The pages and the API call ``hub.search.services.search`` only, which checks
the parameters and hands them over. How to add one: docs/developing/extending/search-backend.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

FACET_LIMIT = 25  # a facet's most frequent values an answer lists


@dataclass(frozen=True)
class Query:
    """A search, its parameters checked (``hub.search.services.search``)."""

    q: str = ""  # at most MAX_WORDS words, no control characters
    filters: dict[str, list[str]] = field(default_factory=dict)  # facet -> alternatives (keywords: all of them)
    sort: str = "new"  # relevance, new or name
    visibility: str = ""  # one level only ("": every level the reader reads)
    with_facets: bool = True
    collapse: bool = True  # list what the hub made from an artifact under it, not beside it


@dataclass
class Answer:
    entries: Sequence  # SearchEntry rows in result order, with ``artifact`` (and its owner), ``version``, ``current``
    total: int
    facets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # facet -> [{"value", "count"}], most first
    suggestion: str = ""  # for a query that found nothing: the same words spelt as the index has them


class SearchBackend(ABC):
    """Answers every search: the words, the facet filters and counts, the read rule and the order."""

    @abstractmethod
    def search(self, query: Query, user) -> Answer:
        """The entries ``user`` (None or anonymous: anyone) may read that match ``query``, in its order: the read
        rule is ``hub.registry.rule``'s, as a query (``readable_by``) or over arrays (``reader_of``, ``visible``)."""

    def changed(self, artifact) -> None:
        """``artifact`` was published, edited or deleted, and its index entry (the database's ``SearchEntry``)
        is already current: a backend with a store of its own brings that store up to date here."""
        return None

    def rebuild(self) -> None:
        """``manage.py hub_reindex``, after the index: a backend with a store of its own rebuilds it here."""
        return None


def backend() -> SearchBackend:
    """The backend ``HUB_SEARCH_BACKEND`` names."""
    return import_string(settings.HUB_SEARCH_BACKEND)()
