"""The default search backend: the index's arrays (``hub.search.index_copy``: a base mapped from the host's disk,
and a delta) answer the read rule's mask, facet filters and counts and the order; a text engine
(``hub.search.engines``) matches the words."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from hub.registry.rule import reader_of
from hub.search import engines, index_copy
from hub.search.backends import Answer, Query, SearchBackend


class IndexBackend(SearchBackend):
    def search(self, query: Query, user) -> Answer:
        reader = reader_of(user)

        def run(words: str) -> index_copy.Hits:
            return index_copy.search(reader, query.filters, query.visibility, engines.matcher(words) if words else None,
                                     query.sort, collapse=query.collapse)
        hits = run(query.q)
        total = hits.count()
        suggestion = suggest(query.q, lambda words: run(words).count()) if query.q and not total else ""
        return Answer(hits, total, hits.facet_counts() if query.with_facets else {}, suggestion)


def suggest(q: str, count: Callable[[str], int]) -> str:
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
        one_edit = [w for w in near if one_edit_apart(plain, w)]  # a typo: a letter wrong, missing, extra or swapped
        close = difflib.get_close_matches(plain, one_edit, n=1, cutoff=0) or \
            difflib.get_close_matches(plain, near, n=1, cutoff=0.8)
        words.append(close[0] if close else word)
        changed |= bool(close)
    suggestion = " ".join(words)
    return suggestion if changed and count(suggestion) else ""


def one_edit_apart(a: str, b: str) -> bool:
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
