"""Text engines: each module turns the words of a query into a ``Matcher`` over the index's snapshots (which
entries match, and a score for each); access rules, facet filters, facet counts and ordering stay in the index
(``hub.search.index_copy``), the same for every engine.

- ``postgres``: PostgreSQL's text search makes the lexemes (stored ``tsvector``s, ``websearch_to_tsquery``); the
  index evaluates the query over its copy of the lexemes, and PostgreSQL matches what it cannot (phrases).
- ``sqlite``: SQLite's FTS5 (``hub.search.fts``), ranked by bm25: the embedded default.
- ``words``: ``LIKE`` word matching on any database (``HUB_SEARCH_ENGINE=words``).

Another engine is one more module with a ``matcher(q)``: e.g. an OpenSearch one for a federation of sites would
send the words to OpenSearch and hand back ``base.matched_by_ids`` of the (artifact id, score) pairs it answers,
as ``sqlite`` does with FTS5's.
"""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError, connection

from hub.search import index_copy


def matcher(q: str) -> index_copy.Matcher:
    """The matcher of the engine this database and ``HUB_SEARCH_ENGINE`` choose."""
    from hub.search.engines import postgres, sqlite, words

    if settings.HUB_SEARCH_ENGINE != "words":
        if connection.vendor == "postgresql":
            return postgres.matcher(q)
        if connection.vendor == "sqlite":
            try:
                return sqlite.matcher(q)
            except DatabaseError:  # an SQLite without FTS5, or a database not migrated to it: words, as before
                pass
    return words.matcher(q)
