"""``LIKE`` word matching on any database: every word must occur; title hits weigh 3, keywords 2, text 1
(``HUB_SEARCH_ENGINE=words``, and SQLite without FTS5)."""

from __future__ import annotations

from django.db.models import Case, IntegerField, Q, QuerySet, Value, When

from hub.search import index_copy
from hub.search.engines.base import matched_by_ids
from hub.search.models import SearchEntry


def matcher(q: str) -> index_copy.Matcher:
    return matched_by_ids(match_words(q).values_list("artifact_id", "rank"))


def match_words(q: str) -> QuerySet:
    """The entries where every word occurs, with their score."""
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
