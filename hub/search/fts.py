"""The embedded default's text search: SQLite FTS5 over the search entries, ranked by bm25 with the hub's field
weights (title 3, keywords 2, text 1, as the word matcher weighs them).

The FTS5 table holds only the index (external content: the text stays in ``search_searchentry``) and is kept
by triggers on that table, so every path that writes an entry keeps it current in the same transaction.
``install`` makes the table and triggers (migration 0006, and after every ``migrate``: a later migration that
remakes the entries' table on SQLite drops its triggers, and ``install`` puts them back and re-reads the
entries). A query is turned into an FTS5 expression of quoted terms, so no user text is FTS5 syntax.
"""

from __future__ import annotations

import re

import numpy as np
from django.db.backends.base.base import BaseDatabaseWrapper

TABLE = "search_fts"
TRIGGERS = ("search_fts_insert", "search_fts_delete", "search_fts_update")
# bm25 weights of title, keywords, text: the word matcher's 3, 2, 1. Deleted artifacts' entries may match:
# the search leaves out entries that are not live (hub.search.index_copy), as it does for every engine.
RANKED = "SELECT rowid, -bm25(search_fts, 3.0, 2.0, 1.0) FROM search_fts WHERE search_fts MATCH %s LIMIT %s"
# Many ids as one text, read into an array in C (no Python object for each of 180k rows: 9x faster here).
IDS = "SELECT group_concat(rowid) FROM search_fts WHERE search_fts MATCH %s"
# Past this many matches bm25 costs more than the rest of a search (about 1 s for 180k rows here): a broad
# match is scored by where its words occur instead, title 3, keywords 2, elsewhere 1, as word matching scores.
RANKED_MAX = 5000
ALL_LIVE = "SELECT group_concat(e.artifact_id) FROM search_searchentry e WHERE e.live"
EXCEPT = " AND e.artifact_id NOT IN (SELECT rowid FROM search_fts WHERE search_fts MATCH %s)"
SCHEMA = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5(title, keywords, text, "
    "content='search_searchentry', content_rowid='artifact_id', tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS search_fts_insert AFTER INSERT ON search_searchentry BEGIN "
    "INSERT INTO search_fts(rowid, title, keywords, text) VALUES (new.artifact_id, new.title, new.keywords, new.text);"
    " END",
    "CREATE TRIGGER IF NOT EXISTS search_fts_delete AFTER DELETE ON search_searchentry BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, title, keywords, text) "
    "VALUES ('delete', old.artifact_id, old.title, old.keywords, old.text); END",
    "CREATE TRIGGER IF NOT EXISTS search_fts_update AFTER UPDATE OF title, keywords, text ON search_searchentry "
    "BEGIN INSERT INTO search_fts(search_fts, rowid, title, keywords, text) "
    "VALUES ('delete', old.artifact_id, old.title, old.keywords, old.text); "
    "INSERT INTO search_fts(rowid, title, keywords, text) VALUES (new.artifact_id, new.title, new.keywords, new.text);"
    " END",
    "INSERT INTO search_fts(search_fts) VALUES ('rebuild')",  # the entries there already
]
TERM = re.compile(r'-?"[^"]*"|\S+')
MIN_PREFIX = 3  # a word this long or longer also finds words it begins ("resnet" finds "resnet50")


def installed(connection: BaseDatabaseWrapper) -> bool:
    """Whether the FTS5 table and all its triggers exist."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_master WHERE name IN (%s, %s, %s, %s)", [TABLE, *TRIGGERS])
        return cursor.fetchone()[0] == 1 + len(TRIGGERS)


def install(connection: BaseDatabaseWrapper) -> bool:
    """Make the table and triggers where any is missing, and index the entries there already; True if it did."""
    if connection.vendor != "sqlite" or installed(connection):
        return False
    with connection.cursor() as cursor:
        for statement in SCHEMA:
            cursor.execute(statement)
    return True


def uninstall(connection: BaseDatabaseWrapper) -> None:
    with connection.cursor() as cursor:
        for statement in ("DROP TRIGGER IF EXISTS search_fts_insert", "DROP TRIGGER IF EXISTS search_fts_delete",
                          "DROP TRIGGER IF EXISTS search_fts_update", "DROP TABLE IF EXISTS search_fts"):
            cursor.execute(statement)


def expression(q: str) -> tuple[str, str]:
    """``q`` as FTS5 expressions (what must match, what must not): words and "quoted phrases" must all occur
    (``or`` between two terms makes them alternatives), ``-word`` must not. Each term is quoted, so FTS5's own
    syntax in a query is only text; a word of ``MIN_PREFIX`` letters or more also matches as a prefix."""
    wanted: list[str] = []
    unwanted: list[str] = []
    alternative = False
    for raw in TERM.findall(q):
        negative = raw.startswith("-") and len(raw) > 1
        text = raw[1:] if negative else raw
        phrase = text.startswith('"') and text.endswith('"') and len(text) > 1
        words = text.strip('"').replace('"', " ").split()
        if not words:
            continue
        if not phrase and not negative and text.lower() == "or" and wanted:
            alternative = True
            continue
        term = '"' + " ".join(words) + '"'
        if not phrase and len(words) == 1 and len(words[0]) >= MIN_PREFIX:
            term += "*"
        if negative:
            unwanted.append(term)
        elif alternative:
            wanted[-1] = f"({wanted[-1]} OR {term})"
            alternative = False
        else:
            wanted.append(term)
    return " AND ".join(wanted), " OR ".join(unwanted)


def matches(connection: BaseDatabaseWrapper, q: str) -> tuple[np.ndarray, np.ndarray]:
    """(artifact ids ascending, their scores) of the entries that match ``q``; a higher score ranks first."""
    wanted, unwanted = expression(q)
    if not wanted and not unwanted:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    with connection.cursor() as cursor:
        if not wanted:  # only words that must not occur: every live entry without them
            ids = np.sort(_ids(cursor, ALL_LIVE + EXCEPT, [unwanted]))
            return ids, np.zeros(len(ids))
        full = f"({wanted}) NOT ({unwanted})" if unwanted else wanted
        cursor.execute(RANKED, [full, RANKED_MAX + 1])
        rows = sorted(cursor.fetchall())
        if len(rows) <= RANKED_MAX:
            return (np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
                    np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows)))
        ids = np.sort(_ids(cursor, IDS, [full]))  # FTS5 gives rowids in order; sorting them again costs little
        scores = np.ones(len(ids))
        for column, extra in (("title", 2.0), ("keywords", 1.0)):
            found = _ids(cursor, IDS, [f"{{{column}}} : ({wanted})"])
            at = np.searchsorted(ids, found)
            inside = at < len(ids)
            inside[inside] = ids[at[inside]] == found[inside]
            scores[at[inside]] += extra
        return ids, scores


def _ids(cursor, sql: str, params: list) -> np.ndarray:
    """The ids ``sql`` gives as one comma-separated text (``group_concat``)."""
    cursor.execute(sql, params)
    text = cursor.fetchone()[0]
    return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)
