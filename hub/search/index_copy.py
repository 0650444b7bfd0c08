"""The in-memory search index: each process keeps a numpy copy of the search entries, their facet values
and (on PostgreSQL) the lexemes of their text vectors, and answers access rules, facet filters, facet
counts, word matching and ordering from it instead of joining 800k facet rows per query.

PostgreSQL still does the language work: its text search configuration makes the lexemes (the stored
``tsvector``) and turns the user's words into a ``tsquery`` (``hub.search.services``); a phrase query is
matched by PostgreSQL itself.

Freshness: a query reads ``SearchState.generation`` (one row). Entries changed since the base snapshot
was built (``seq`` above its generation) are loaded into a small delta snapshot that overrides the base;
past ``DELTA_LIMIT`` changed entries the base is rebuilt. Generations are handed out in commit order
(``hub.search.index.next_generation``), so no committed change is missed.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Q

from hub.search.models import FACETS, FacetValue, SearchEntry, SearchState

logger = logging.getLogger(__name__)

# ts_rank's default weights for the vector's parts: title (A), keywords (B), description and card (C).
WEIGHTS = {"a": 1.0, "b": 0.4, "c": 0.2}
DELTA_LIMIT = 500  # a 500-entry delta loads in ~30 ms at 100k entries; a new base takes ~5 s
WORDS_CHUNK = 5000
IN_CHUNK = 500
FACET_LIMIT = 25


@dataclass(frozen=True)
class Postings:
    """Values, each with the sorted ordinals of the entries that carry it (and, for words, a weight)."""

    values: list[str]
    lookup: dict[str, int]
    starts: np.ndarray  # value i's pairs are [starts[i], starts[i + 1])
    ords: np.ndarray  # entry ordinal of each pair
    codes: np.ndarray | None  # value of each pair (kept where values are counted)
    weights: np.ndarray | None = None

    @classmethod
    def build(cls, values: list[str], codes: np.ndarray, ords: np.ndarray,
              weights: np.ndarray | None = None, ordered: bool = False, counted: bool = True) -> Postings:
        """``ordered``: the pairs already come sorted by value, then entry; ``counted``: keep each pair's
        value for ``counts``."""
        if not ordered:
            order = np.lexsort((ords, codes))
            codes, ords = codes[order], ords[order]
            weights = None if weights is None else weights[order]
        codes, ords = codes.astype(np.int32), ords.astype(np.int32)
        starts = np.searchsorted(codes, np.arange(len(values) + 1))
        return cls(values, {v: i for i, v in enumerate(values)}, starts, ords, codes if counted else None,
                   None if weights is None else weights.astype(np.float32))

    def slice(self, value: str) -> slice:
        code = self.lookup.get(value)
        return slice(0, 0) if code is None else slice(self.starts[code], self.starts[code + 1])

    def mask(self, values: Sequence[str], size: int) -> np.ndarray:
        """Entries that carry any of ``values``."""
        out = np.zeros(size, dtype=bool)
        for value in values:
            out[self.ords[self.slice(value)]] = True
        return out

    def counts(self, mask: np.ndarray) -> dict[str, int]:
        """How many of the entries in ``mask`` carry each value (values with none left out)."""
        counted = np.bincount(self.codes[mask[self.ords]], minlength=len(self.values))
        return {self.values[i]: int(counted[i]) for i in np.flatnonzero(counted)}


@dataclass(frozen=True)
class Snapshot:
    """Entries in ascending artifact id order (an entry's ordinal is its position)."""

    ids: np.ndarray
    live: np.ndarray
    public: np.ndarray
    owner: np.ndarray
    parent: np.ndarray  # the artifact a derived entry is listed under (0: none; ``SearchEntry.parent``)
    updated: np.ndarray  # seconds since the epoch
    titles: list[str]
    recency: np.ndarray  # 0 for the newest (ties: lower id first)
    by_title: np.ndarray  # 0 for the first title in alphabetical order (ties: lower id first)
    facets: dict[str, Postings]
    words: Postings | None  # lexemes with their best weight, PostgreSQL only

    @property
    def size(self) -> int:
        return len(self.ids)

    def positions(self, artifact_ids: np.ndarray) -> np.ndarray:
        """Ordinals of those of ``artifact_ids`` that this snapshot holds."""
        pos, found = locate(self.ids, artifact_ids)
        return pos[found]

    def visible(self, user, shared: np.ndarray) -> np.ndarray:
        """The registry's access rule (``hub.registry.models.readable_by``) over this snapshot."""
        if user is not None and user.is_authenticated and user.is_superuser:
            return self.live.copy()
        mask = self.public.copy()
        if user is not None and user.is_authenticated:
            mask |= self.owner == user.pk
            mask[self.positions(shared)] = True
        return mask & self.live


def locate(ids: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``wanted`` sits in the sorted ``ids``, and whether it is there at all."""
    pos = np.searchsorted(ids, wanted)
    found = np.zeros(len(wanted), dtype=bool)
    inside = pos < len(ids)
    found[inside] = ids[pos[inside]] == wanted[inside]
    return pos, found


def _ranks(order: np.ndarray) -> np.ndarray:
    """The inverse of a sorting permutation: each element's place in the order."""
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(len(order))
    return ranks


def _facets(base: bool, ids: np.ndarray) -> dict[str, Postings]:
    """One Postings per facet: each value with the entries that carry it (grouped by the database)."""
    table = FacetValue._meta.db_table
    join = "string_agg(entry_id::text, ' ')" if connection.vendor == "postgresql" else "group_concat(entry_id, ' ')"
    select = f"SELECT facet, value, {join} FROM {table}"  # noqa: S608 - constants; values are params
    grouped = []
    with connection.cursor() as cursor:
        if base:
            cursor.execute(select + " GROUP BY facet, value")
            grouped = cursor.fetchall()
        else:  # a delta: by the entries' ids, so that the (entry, facet, value) index answers
            for first in range(0, len(ids), IN_CHUNK):
                chunk = [int(i) for i in ids[first:first + IN_CHUNK]]
                marks = ", ".join(["%s"] * len(chunk))
                cursor.execute(f"{select} WHERE entry_id IN ({marks}) GROUP BY facet, value", chunk)
                grouped += cursor.fetchall()
    merged: dict[tuple[str, str], list[str]] = {}
    for facet, value, members in grouped:  # a delta's chunks can each hold the same value
        merged.setdefault((facet, value), []).append(members)
    out = {}
    for name in FACETS:
        rows = [(value, np.asarray(" ".join(members).split(" "), dtype=np.int64))
                for (facet, value), members in merged.items() if facet == name]
        members = np.concatenate([m for _, m in rows]) if rows else np.zeros(0, dtype=np.int64)
        codes = np.repeat(np.arange(len(rows)), [len(m) for _, m in rows]).astype(np.int64)
        pos, known = locate(ids, members)
        out[name] = Postings.build([value for value, _ in rows], codes[known], pos[known])
    return out


def _words(entries, size: int) -> Postings:
    """Each entry's lexemes with their best weight, read from the stored vectors in chunks (so that a
    100k-entry index never holds millions of Python strings at once)."""
    inner, params = entries.values_list("artifact_id", "search_vector").query.sql_with_params()
    split = ", ".join(f"ts_filter(v, '{{{part}}}') AS {part}" for part in WEIGHTS)
    columns = ", ".join(f"array_to_string(tsvector_to_array({part}), ' '), coalesce(length({part}), 0)"
                        for part in WEIGHTS)
    sql = f"SELECT {columns} FROM (SELECT id, {split} FROM ({inner}) AS e (id, v)) AS t ORDER BY id"  # noqa: S608
    vocabulary: dict[str, int] = {}
    keys, weights, first_ord = [], [], 0
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(WORDS_CHUNK):
            ords = np.arange(first_ord, first_ord + len(rows), dtype=np.int64)
            for i, weight in enumerate(WEIGHTS.values()):  # best weight first: a lexeme's first pair wins
                counts = np.fromiter((row[2 * i + 1] for row in rows), dtype=np.int64, count=len(rows))
                lexemes = " ".join(row[2 * i] for row in rows if row[2 * i]).split(" ") if counts.any() else []
                for lexeme in dict.fromkeys(lexemes):
                    vocabulary.setdefault(lexeme, len(vocabulary))
                codes = np.fromiter(map(vocabulary.__getitem__, lexemes), dtype=np.int64, count=len(lexemes))
                keys.append(codes * max(size, 1) + np.repeat(ords, counts))
                weights.append(np.full(len(lexemes), weight, dtype=np.float32))
            first_ord += len(rows)
    key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    key = key[order]
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    key = key[first]
    return Postings.build(list(vocabulary), key // max(size, 1), key % max(size, 1),
                          (np.concatenate(weights) if weights else np.zeros(0, np.float32))[order][first],
                          ordered=True, counted=False)


BASE = Q(live=True)


def load(where: Q) -> Snapshot:
    """Build a snapshot of the entries ``where`` selects (their facet values and lexemes with them)."""
    try:
        return _load(where)
    finally:
        _release_freed_memory()


def _release_freed_memory() -> None:
    """Hand the building's freed heap back to the system (glibc keeps it otherwise: ~140 MB at 100k)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _load(where: Q) -> Snapshot:
    entries = SearchEntry.objects.filter(where).order_by("artifact_id")
    rows = list(entries.values_list("artifact_id", "live", "visibility", "owner_id", "updated", "title", "parent_id"))
    ids_list, live, visibility, owner, updated_at, titles, parents = (list(c) for c in zip(*rows, strict=True)) \
        if rows else ([], [], [], [], [], [], [])
    size = len(rows)
    ids = np.asarray(ids_list, dtype=np.int64)
    updated = np.fromiter((u.timestamp() for u in updated_at), dtype=np.float64, count=size)
    words = _words(entries, size) if connection.vendor == "postgresql" else None
    return Snapshot(
        ids=ids, live=np.asarray(live, dtype=bool), public=np.asarray([v == "public" for v in visibility], dtype=bool),
        owner=np.asarray(owner, dtype=np.int64), parent=np.asarray([p or 0 for p in parents], dtype=np.int64),
        updated=updated, titles=titles,
        recency=_ranks(np.lexsort((ids, -updated))),
        by_title=_ranks(np.asarray(sorted(range(size), key=lambda i: (titles[i].casefold(), ids_list[i])),
                                   dtype=np.int64)),
        facets=_facets(where == BASE, ids), words=words,
    )


@dataclass(frozen=True)
class View:
    """What a query reads: the base snapshot (less the entries the delta overrides) and the delta."""

    generation: int
    base_generation: int
    parts: tuple[tuple[Snapshot, np.ndarray], ...]  # (snapshot, its entries that count)


def generation() -> int:
    return SearchState.objects.filter(pk=1).values_list("generation", flat=True).first() or 0


_lock = threading.Lock()
_rebuilding = threading.Event()
_view: View | None = None


def forget() -> None:
    """Drop this process's copy (tests do, after rolling the database back)."""
    global _view, _vocabulary
    with _lock:
        _view, _vocabulary = None, None
        _spelling.clear()


def current() -> View:
    """The index as of the database's current generation, loading what changed since the last call."""
    global _view
    now = generation()
    view = _view
    if view is not None and view.generation == now:
        return view
    with _lock:
        view = _view
        if view is None or view.generation != now:
            if view is None or now < view.base_generation:
                base = load(BASE)
                view = View(now, now, ((base, base.live),))
            else:
                view = _with_delta(view.parts[0][0], view.base_generation, now)
                if view.parts[1][0].size > DELTA_LIMIT:
                    view = _rebuild(view)
            _view = view
        return view


def _with_delta(base: Snapshot, base_generation: int, now: int) -> View:
    delta = load(Q(seq__gt=base_generation))
    overridden = np.zeros(base.size, dtype=bool)
    overridden[base.positions(delta.ids)] = True
    return View(now, base_generation, ((base, base.live & ~overridden), (delta, delta.live)))


def _rebuild(view: View) -> View:
    """A new base once the delta has grown past DELTA_LIMIT: built here inside a transaction (another
    thread could not see its rows), otherwise by a background thread while ``view`` goes on serving."""
    if connection.in_atomic_block:
        base = load(BASE)
        return View(view.generation, view.generation, ((base, base.live),))
    if not _rebuilding.is_set():
        _rebuilding.set()
        threading.Thread(target=_rebuild_in_background, name="search-index-rebuild", daemon=True).start()
    return view


def _rebuild_in_background() -> None:
    global _view
    try:
        now = generation()
        base = load(BASE)
        with _lock:
            if _view is None or _view.base_generation < now:
                _view = View(now, now, ((base, base.live),))  # the next query loads what changed since
    except Exception:  # the old view goes on serving; the next change tries again
        logger.exception("rebuilding the search index failed")
    finally:
        _rebuilding.clear()
        connection.close()


_warming = threading.Event()


def loaded() -> bool:
    """Whether this process holds a copy (of some generation) to answer from (``/readyz``)."""
    return _view is not None


def held_generation() -> int | None:
    """The generation this process's copy answers for (None before it is loaded): ``/metrics``."""
    view = _view
    return None if view is None else view.generation


def warm() -> None:
    """Build this process's copy in the background (the web server calls this as it starts; ``/readyz`` too,
    while none is loaded); a call while a build runs starts no other."""
    if _warming.is_set():
        return
    _warming.set()

    def build() -> None:
        try:
            current()
        except Exception:  # e.g. a database that is not migrated yet: the first search builds it
            logger.warning("could not build the search index ahead of time", exc_info=True)
        finally:
            _warming.clear()
            connection.close()
    threading.Thread(target=build, name="search-index-warm", daemon=True).start()


Matcher = Callable[[Snapshot], tuple[np.ndarray, np.ndarray]]  # (matching entries, their scores)


class Hits(Sequence):
    """The ordered result of a search: its length, and slices of SearchEntry rows fetched on demand."""

    def __init__(self, parts: list[tuple[Snapshot, np.ndarray, np.ndarray | None]], sort: str,
                 counted: list[dict[str, np.ndarray]] | None = None) -> None:
        self.parts = parts  # (snapshot, ordinals of the hits, score per ordinal or None)
        self.sort = sort
        self.counted = counted or [{} for _ in parts]  # per part: facet -> the entries its counts range over
        self._order: list[int] = []

    def count(self) -> int:
        return sum(len(ords) for _, ords, _ in self.parts)

    def __len__(self) -> int:
        return self.count()

    def ids(self, stop: int) -> list[int]:
        """The first ``stop`` artifact ids in result order."""
        if len(self._order) < min(stop, self.count()):
            candidates = []
            for snapshot, ords, scores in self.parts:
                for o in _top(snapshot, ords, scores, self.sort, stop):
                    candidates.append((self._key(snapshot, o, scores), int(snapshot.ids[o])))
            self._order = [artifact_id for _, artifact_id in sorted(candidates)[:stop]]
        return self._order[:stop]

    def _key(self, snapshot: Snapshot, o: int, scores: np.ndarray | None) -> tuple:
        artifact_id = int(snapshot.ids[o])
        if self.sort == "name":
            return snapshot.titles[o].casefold(), artifact_id
        recency = (-float(snapshot.updated[o]), artifact_id)
        return recency if scores is None or self.sort == "new" else (-float(scores[o]), *recency)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            found = self[index:index + 1]
            if not found:
                raise IndexError(index)
            return found[0]
        start, stop, _ = index.indices(self.count())
        ids = self.ids(stop)[start:]
        rows = SearchEntry.objects.filter(pk__in=ids).defer("search_vector", "text", "keywords") \
            .select_related("artifact__owner", "version").prefetch_related("artifact__collaborators").in_bulk()
        return [rows[i] for i in ids if i in rows]

    def facet_counts(self) -> dict[str, list[dict[str, Any]]]:
        """For each facet, its most frequent values among the hits with their counts. A facet the query
        filters on (keywords excepted: they narrow, as tags) counts its values as if it were not filtered, so
        that its other values stay there to be added as alternatives."""
        totals: dict[str, dict[str, int]] = {name: {} for name in FACETS}
        for (snapshot, ords, _), counted in zip(self.parts, self.counted, strict=True):
            mask = np.zeros(snapshot.size, dtype=bool)
            mask[ords] = True
            for name, postings in snapshot.facets.items():
                bucket = totals[name]
                for value, n in postings.counts(counted.get(name, mask)).items():
                    bucket[value] = bucket.get(value, 0) + n
        return {name: [{"value": v, "count": n} for v, n in sorted(bucket.items(), key=lambda i: (-i[1], i[0]))
                       [:FACET_LIMIT]] for name, bucket in totals.items()}


def _top(snapshot: Snapshot, ords: np.ndarray, scores: np.ndarray | None, sort: str, stop: int) -> np.ndarray:
    """The first ``stop`` of ``ords`` in result order (as ``Hits._key`` orders them)."""
    if sort == "name":
        key = snapshot.by_title[ords]
    elif scores is None or sort == "new":
        key = snapshot.recency[ords]
    else:  # relevance: best score first, then newest
        _, tier = np.unique(-scores[ords], return_inverse=True)
        key = tier.astype(np.int64) * snapshot.size + snapshot.recency[ords]
    if stop < len(ords):
        chosen = np.argpartition(key, stop - 1)[:stop]
        return ords[chosen[np.argsort(key[chosen])]]
    return ords[np.argsort(key)]


def search(user, shared: np.ndarray, filters: dict[str, list[str]], visibility: str, matcher: Matcher | None,
           sort: str, collapse: bool = True) -> Hits:
    """Entries ``user`` may see (``shared``: ids of private artifacts shared with them) that pass every facet
    filter, ``visibility`` and ``matcher``, in ``sort`` order. ``collapse``: leave out derived entries whose
    parent the user can see (they are listed under it)."""
    view = current()
    visible = [counted & snapshot.visible(user, shared) for snapshot, counted in view.parts]
    if collapse:
        seen = np.sort(np.concatenate([snapshot.ids[mask] for (snapshot, _), mask in zip(view.parts, visible,
                                                                                        strict=True)]))
        for (snapshot, _), mask in zip(view.parts, visible, strict=True):
            _, parent_seen = locate(seen, snapshot.parent)
            mask &= ~((snapshot.parent > 0) & parent_seen)
    parts, counted_parts = [], []
    for (snapshot, _), mask in zip(view.parts, visible, strict=True):
        if visibility:
            mask &= snapshot.public if visibility == "public" else ~snapshot.public
        scores = None
        if matcher is not None:
            matched, scores = matcher(snapshot)
            mask &= matched
        by_facet = {}
        for name, values in filters.items():  # names checked against FACETS; every snapshot has them all
            groups = [[v] for v in values] if name == "keyword" else [values]
            passed = np.ones(snapshot.size, dtype=bool)
            for group in groups:
                passed &= snapshot.facets[name].mask(group, snapshot.size)
            by_facet[name] = passed
        hits = mask.copy()
        for passed in by_facet.values():
            hits &= passed
        counted = {}
        for name in by_facet:
            if name != "keyword":
                counted[name] = mask.copy()
                for other, passed in by_facet.items():
                    if other != name:
                        counted[name] &= passed
        parts.append((snapshot, np.flatnonzero(hits), scores))
        counted_parts.append(counted)
    return Hits(parts, sort, counted_parts)


WORD = re.compile(r"[^\W\d_]{4,}")
SPELLING_FACETS = ("keyword", "framework", "format", "task")


@dataclass(frozen=True)
class _Words:
    """A snapshot's spelling words over its public, live entries, with how many (entry, title or facet value)
    pairs give each, so that leaving some entries out costs only their own words."""

    snapshot: Snapshot
    words: frozenset[str]
    counts: dict[str, int]


_spelling: dict[int, _Words] = {}  # id(snapshot) -> its words
_vocabulary: tuple[View, frozenset[str]] | None = None


def _words_of(snapshot: Snapshot, mask: np.ndarray) -> dict[str, int]:
    """The spelling words of the entries in ``mask``: each title's words once per entry, each facet value's
    once per entry that carries it."""
    found: dict[str, int] = {}
    for o in np.flatnonzero(mask):
        for word in set(WORD.findall(snapshot.titles[o].lower())):
            found[word] = found.get(word, 0) + 1
    for name in SPELLING_FACETS:
        for value, n in snapshot.facets[name].counts(mask).items():
            for word in set(WORD.findall(value.lower())):
                found[word] = found.get(word, 0) + n
    return found


def vocabulary() -> frozenset[str]:
    """The words a spelling suggestion may offer: from the titles, keywords and facet values of public,
    live entries only (a private artifact's words never reach anyone), lower case, four letters or more.

    Kept per snapshot, and per view: a change (a new delta, which overrides a few base entries) reads only the
    words of the entries it touches, never every public title again (9-13 s at 1M entries)."""
    global _vocabulary
    view = current()
    cached = _vocabulary
    if cached is not None and cached[0] is view:
        return cached[1]
    kept, parts = {}, []
    for snapshot, counted in view.parts:
        whole = snapshot.public & snapshot.live
        entry = _spelling.get(id(snapshot))
        if entry is None or entry.snapshot is not snapshot:
            counts = _words_of(snapshot, whole)
            entry = _Words(snapshot, frozenset(counts), counts)
        kept[id(snapshot)] = entry
        left_out = whole & ~counted
        words = entry.words
        if left_out.any():
            gone = _words_of(snapshot, left_out)
            words = words - {word for word, n in gone.items() if entry.counts.get(word, 0) <= n}
        parts.append(words)
    _spelling.clear()
    _spelling.update(kept)
    words = frozenset().union(*parts)
    _vocabulary = (view, words)
    return words
