"""Search: full text with ranking (PostgreSQL's text search; SQLite's FTS5, ``hub.search.fts``; word matching
with ``HUB_SEARCH_ENGINE=words``), facet filters,
and facet counts over the results. Private artifacts appear only to those who may read them.

Filters, counts, access and ordering run over the index's arrays (``hub.search.index_copy``: a base mapped from
the host's disk, and a delta). Words are
turned into lexemes by PostgreSQL (``websearch_to_tsquery``) and matched against the index's copy of the
stored vectors; a phrase is matched by PostgreSQL itself. On SQLite, FTS5 finds the entries and ranks them by bm25.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import DatabaseError, connection
from django.db.models import Case, F, IntegerField, Q, QuerySet, Value, When

from hub.errors import HubError
from hub.registry.models import Artifact, shared_with
from hub.search import fts, index_copy
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
    matcher = _matcher(q) if q else None
    sort = sort or ("relevance" if q else "new")
    shared = _shared(user)
    hits = index_copy.search(user, shared, filters, visibility, matcher, sort, collapse=derived == "collapse")
    suggestion = ""
    if q and not hits.count():
        suggestion = _suggest(q, lambda words: index_copy.search(user, shared, filters, visibility, _matcher(words),
                                                             sort, collapse=derived == "collapse").count())
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
        close = difflib.get_close_matches(plain, near, n=1, cutoff=0.8)
        words.append(close[0] if close else word)
        changed |= bool(close)
    suggestion = " ".join(words)
    return suggestion if changed and count(suggestion) else ""


def _shared(user) -> np.ndarray:
    if user is None or not user.is_authenticated or user.is_superuser:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.fromiter(shared_with(user).values_list("artifact_id", flat=True), dtype=np.int64))


def _matcher(q: str) -> index_copy.Matcher:
    if connection.vendor == "postgresql" and settings.HUB_SEARCH_ENGINE != "words":
        with connection.cursor() as cursor:
            cursor.execute("SELECT websearch_to_tsquery('english', %s)::text", [q])
            tsquery = cursor.fetchone()[0]
        try:
            tree = parse_tsquery(tsquery)
        except ValueError:  # a phrase, or anything the index cannot evaluate: PostgreSQL matches it
            return _matched_by_database(_match_vector(q).values_list("artifact_id", "rank"))
        return lambda snapshot: evaluate(tree, snapshot)
    if connection.vendor == "sqlite" and settings.HUB_SEARCH_ENGINE != "words":
        try:
            return _matched_by_database(fts.matches(connection, q))
        except DatabaseError:  # an SQLite without FTS5, or a database not migrated to it: words, as before
            pass
    return _matched_by_database(_match_words(q).values_list("artifact_id", "rank"))


def _matched_by_database(matches: Iterable[tuple[int, float]]) -> index_copy.Matcher:
    rows = sorted(matches)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    ranks = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))

    def matcher(snapshot: index_copy.Snapshot) -> tuple[np.ndarray, np.ndarray]:
        pos, found = index_copy.locate(snapshot.ids, ids)
        mask, scores = np.zeros(snapshot.size, dtype=bool), np.zeros(snapshot.size, dtype=np.float64)
        mask[pos[found]], scores[pos[found]] = True, ranks[found]
        return mask, scores
    return matcher


def _match_vector(q: str) -> QuerySet:
    query = SearchQuery(q, search_type="websearch", config="english")
    return SearchEntry.objects.filter(live=True, search_vector=query).annotate(
        rank=SearchRank(F("search_vector"), query))


def _match_words(q: str) -> QuerySet:
    """The portable fallback (SQLite): every word must occur; title hits weigh 3, keywords 2, text 1."""
    entries = SearchEntry.objects.filter(live=True)
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


TSQUERY_TOKEN = re.compile(r"\s*(?:'((?:[^']|'')*)'(:[*A-Da-d]+)?|(!|&|\||\(|\)|<(?:-|\d+)>))")


def parse_tsquery(text: str) -> tuple | None:
    """PostgreSQL's text form of a tsquery as a tree of ("word", lexeme), ("not", x), ("and", x, y) and
    ("or", x, y); None for an empty query. Raises ValueError on a phrase or a prefix, which only
    PostgreSQL evaluates."""
    tokens, at = [], 0
    while text[at:].strip():
        found = TSQUERY_TOKEN.match(text, at)
        if not found or found.group(2) or (found.group(3) or "").startswith("<"):
            raise ValueError(f"not evaluated in memory: {text[at:]!r}")
        tokens.append(("word", found.group(1).replace("''", "'")) if found.group(1) is not None else found.group(3))
        at = found.end()
    if not tokens:
        return None
    tree, rest = _or(tokens)
    if rest:
        raise ValueError(f"unexpected {rest[0]!r}")
    return tree


def _or(tokens: list) -> tuple[tuple, list]:
    return _chain(tokens, "|", "or", _and)


def _and(tokens: list) -> tuple[tuple, list]:
    return _chain(tokens, "&", "and", _unary)


def _chain(tokens: list, symbol: str, op: str, operand) -> tuple[tuple, list]:
    """``operand (symbol operand)*``, folded to the left."""
    left, tokens = operand(tokens)
    while tokens and tokens[0] == symbol:
        right, tokens = operand(tokens[1:])
        left = (op, left, right)
    return left, tokens


def _unary(tokens: list) -> tuple[tuple, list]:
    if not tokens:
        raise ValueError("the query ends early")
    head, tokens = tokens[0], tokens[1:]
    if head == "!":
        inner, tokens = _unary(tokens)
        return ("not", inner), tokens
    if head == "(":
        inner, tokens = _or(tokens)
        if not tokens or tokens[0] != ")":
            raise ValueError("unbalanced parenthesis")
        return inner, tokens[1:]
    if isinstance(head, tuple):
        return head, tokens
    raise ValueError(f"unexpected {head!r}")


def evaluate(tree: tuple | None, snapshot: index_copy.Snapshot) -> tuple[np.ndarray, np.ndarray]:
    """Entries of ``snapshot`` that match ``tree``, and a score per entry: the sum of the best weight
    (title 1.0, keywords 0.4, text 0.2) of each matched word."""
    size = snapshot.size
    mask, scores = np.zeros(size, dtype=bool), np.zeros(size, dtype=np.float32)
    if tree is None or snapshot.words is None:
        return mask, scores
    op = tree[0]
    if op == "word":
        where = snapshot.words.find(tree[1])
        mask[snapshot.words.ords[where]] = True
        scores[snapshot.words.ords[where]] = snapshot.words.weights[where]
        return mask, scores
    if op == "not":
        inner, _ = evaluate(tree[1], snapshot)
        return ~inner, scores
    (left, left_scores), (right, right_scores) = evaluate(tree[1], snapshot), evaluate(tree[2], snapshot)
    return (left & right if op == "and" else left | right), left_scores + right_scores
