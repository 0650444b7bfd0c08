"""SQLite's FTS5 (``hub.search.fts``: the table, its triggers and the query syntax), ranked by bm25 with the hub's
field weights: the embedded default's engine."""

from __future__ import annotations

from django.db import connection

from hub.search import fts, index_copy
from hub.search.engines.base import matched_by_arrays


def matcher(q: str) -> index_copy.Matcher:
    """Raises DatabaseError where SQLite has no FTS5 or the table is missing (the caller falls back to words)."""
    return matched_by_arrays(*fts.matches(connection, q))
