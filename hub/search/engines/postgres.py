"""PostgreSQL's text search: the words become a ``tsquery`` (``websearch_to_tsquery``: ``"a phrase"``, ``-word``,
``or``), evaluated by the index over its copy of the stored vectors' lexemes; a phrase, which needs positions, is
matched by PostgreSQL itself. Score: the sum of each matched word's best weight (title 1.0, keywords 0.4, text 0.2).
"""

from __future__ import annotations

import re

import numpy as np
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import F, QuerySet

from hub.search import index_copy
from hub.search.engines.base import matched_by_ids
from hub.search.models import SearchEntry


def matcher(q: str) -> index_copy.Matcher:
    with connection.cursor() as cursor:
        cursor.execute("SELECT websearch_to_tsquery('english', %s)::text", [q])
        tsquery = cursor.fetchone()[0]
    try:
        tree = parse_tsquery(tsquery)
    except ValueError:  # a phrase, or anything the index cannot evaluate: PostgreSQL matches it
        return matched_by_ids(match_vector(q).values_list("artifact_id", "rank"))
    return lambda snapshot: evaluate(tree, snapshot)


def match_vector(q: str) -> QuerySet:
    query = SearchQuery(q, search_type="websearch", config="english")
    return SearchEntry.objects.filter(live=True, search_vector=query).annotate(
        rank=SearchRank(F("search_vector"), query))


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
