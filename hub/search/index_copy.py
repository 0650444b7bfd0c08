"""The search index as numpy arrays: access rules, facet filters, facet counts, word matching and ordering are
answered from postings instead of joining 800k facet rows per query.

Where it lives: a **base**, built by one indexer per host and memory-mapped by every process of the host
(``hub.search.mapped``: the page cache holds it once per host; a process that starts maps it in milliseconds),
plus a small **delta** per process: the entries changed since the base was built, read from the database.
Past ``DELTA_LIMIT`` changed entries the host's indexer builds a new base in the background (the processes go on
answering from base + delta meanwhile). Nothing here grows with the catalogue per process beyond the delta and
the masks of one query; nothing is rebuilt when a process starts.

PostgreSQL still does the language work: its text search configuration makes the lexemes (the stored
``tsvector``) and turns the user's words into a ``tsquery`` (``hub.search.services``); a phrase query is
matched by PostgreSQL itself.

Freshness: a query reads ``SearchState`` (one row: the generation and the database's epoch). Entries changed
since the base (``seq`` above its generation) are loaded into the delta, which overrides the base. Generations
are handed out in commit order (``hub.search.index.next_generation``), so no committed change is missed. A base
names the epoch of the database it was built from, so a restored or recreated database never reads it.
Inside a transaction (tests) a base is built in memory and never published: other processes cannot see its rows.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Q

from hub.registry import rule
from hub.search import mapped
from hub.search.backends import FACET_LIMIT
from hub.search.mapped import Strings
from hub.search.models import FACETS, FacetValue, SearchEntry, SearchState

logger = logging.getLogger(__name__)

# ts_rank's default weights for the vector's parts: title (A), keywords (B), description and card (C).
WEIGHTS = {"a": 1.0, "b": 0.4, "c": 0.2}
DELTA_LIMIT = 500  # a 500-entry delta loads in ~30 ms at 100k entries; a new base takes ~5 s
WORDS_CHUNK = 5000
IN_CHUNK = 500
AMONG = 5  # a search's sets are found among the entries that pass the rule and the words below 1/AMONG of the index
SPARSE = 4  # a facet whose pairs are this many times fewer than a mask's entries is counted from its pairs


def _ranges(starts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The positions ``starts[r]:starts[r + 1]`` of every ``r`` in ``rows``, concatenated."""
    begins = starts[rows].astype(np.int64)
    lengths = starts[rows + 1].astype(np.int64) - begins
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(begins - (np.cumsum(lengths) - lengths), lengths) + np.arange(total, dtype=np.int64)


class Rows:
    """The entries of a mask, found once for every facet counted over it: those in it, or, when they are more
    than half, those not in it. ``ords``: the mask's entries, when the caller found them already."""

    def __init__(self, mask: np.ndarray, ords: np.ndarray | None = None) -> None:
        self.mask, self.ords = mask, ords
        self._fewer: tuple[np.ndarray, bool] | None = None

    @classmethod
    def among(cls, mask: np.ndarray, within: np.ndarray) -> Rows:
        """The entries of ``mask``, all of which are among the ordinals ``within``: found among those (a few
        reads each) rather than by a pass over the whole index (1.7 ms at 1M entries)."""
        return cls(mask, within[mask[within]])

    def fewer(self) -> tuple[np.ndarray, bool]:
        """(ordinals, whether they are the entries *not* in the mask)."""
        if self._fewer is None:
            hits = int(np.count_nonzero(self.mask)) if self.ords is None else len(self.ords)
            if 2 * hits > len(self.mask):
                self._fewer = (np.flatnonzero(~self.mask), True)
            else:
                self._fewer = (np.flatnonzero(self.mask) if self.ords is None else self.ords, False)
        return self._fewer


@dataclass(frozen=True)
class Postings:
    """Values (sorted), each with the sorted ordinals of the entries that carry it (and, for words, a weight).
    Counted postings also keep the pairs by entry and each value's total, so that counting over a few hits (or
    over all but a few) reads only those entries' pairs."""

    values: Strings
    starts: np.ndarray  # value i's pairs are [starts[i], starts[i + 1])
    ords: np.ndarray  # entry ordinal of each pair
    weights: np.ndarray | None = None
    entry_starts: np.ndarray | None = None  # entry o's values are entry_codes[entry_starts[o]:entry_starts[o + 1]]
    entry_codes: np.ndarray | None = None
    totals: np.ndarray | None = None  # per value: how many entries carry it
    single: np.ndarray | None = None  # where no entry has two values: each entry's value code + 1 (0: none)

    ARRAYS = ("starts", "ords", "weights", "entry_starts", "entry_codes", "totals", "single")

    @classmethod
    def build(cls, values: list[str], codes: np.ndarray, ords: np.ndarray, size: int,
              weights: np.ndarray | None = None, ordered: bool = False, counted: bool = True) -> Postings:
        """``values`` in sorted order; ``ordered``: the pairs already come sorted by value, then entry;
        ``counted``: keep what ``counts`` needs."""
        if not ordered:
            order = np.lexsort((ords, codes))
            codes, ords = codes[order], ords[order]
            weights = None if weights is None else weights[order]
        codes, ords = codes.astype(np.int32), ords.astype(np.int32)
        starts = np.searchsorted(codes, np.arange(len(values) + 1)).astype(np.int64)
        extra: dict[str, np.ndarray] = {}
        if counted:
            by_entry = np.lexsort((codes, ords))
            entry_starts = np.searchsorted(ords[by_entry], np.arange(size + 1)).astype(np.int64)
            extra = {"totals": np.bincount(codes, minlength=len(values)).astype(np.int64)}
            if not len(ords) or np.diff(entry_starts).max() <= 1:
                extra["single"] = np.zeros(size, dtype=np.int32)
                extra["single"][ords] = codes + 1
            else:
                extra.update(entry_codes=codes[by_entry], entry_starts=entry_starts)
        return cls(Strings.of(values), starts, ords, None if weights is None else weights.astype(np.float32), **extra)

    def find(self, value: str) -> slice:
        code = self.values.find(value)
        return slice(0, 0) if code is None else slice(int(self.starts[code]), int(self.starts[code + 1]))

    def mask(self, values: Sequence[str], size: int) -> np.ndarray:
        """Entries that carry any of ``values``."""
        out = np.zeros(size, dtype=bool)
        for value in values:
            out[self.ords[self.find(value)]] = True
        return out

    def count_array(self, mask: np.ndarray, rows: Rows | None = None) -> np.ndarray:
        """How many of the entries in ``mask`` carry each value (by value code), read from the entries in
        ``mask`` or, when they are more than half, from the others (subtracted from each value's total): each
        entry's own value where no entry has two, else its pairs in entry order. A facet with few pairs (a
        format's own facet, one only some entries have; an empty one) is read in value order instead, every pair
        once: that reads the mask at random, 2-4x slower a pair, so only where the pairs are SPARSE times fewer
        than those entries. ``rows``: the mask's entries, when the caller has them."""
        rows = rows or Rows(mask)
        fewer, subtract = rows.fewer()
        if SPARSE * len(self.ords) < len(fewer):
            inside = np.zeros(len(self.ords) + 1, dtype=np.int64)
            np.cumsum(mask[self.ords], out=inside[1:])
            return inside[self.starts[1:]] - inside[self.starts[:-1]]
        if self.single is not None:
            found = np.bincount(self.single[fewer], minlength=len(self.values) + 1)[1:]
        else:
            found = np.bincount(self.entry_codes[_ranges(self.entry_starts, fewer)], minlength=len(self.values))
        return self.totals - found if subtract else found

    def counts(self, mask: np.ndarray) -> dict[str, int]:
        """``count_array`` by value, values with none left out."""
        counted = self.count_array(mask)
        return {self.values[i]: int(counted[i]) for i in np.flatnonzero(counted)}

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        out = self.values.arrays(f"{prefix}.values")
        for name in self.ARRAYS:
            if getattr(self, name) is not None:
                out[f"{prefix}.{name}"] = getattr(self, name)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> Postings:
        return cls(Strings.from_arrays(arrays, f"{prefix}.values"),
                   **{name: arrays.get(f"{prefix}.{name}") for name in cls.ARRAYS})


@dataclass(frozen=True)
class Spelling:
    """The words a spelling suggestion may offer from a base (sorted), and how many (entry, title or facet
    value) pairs give each, so that leaving some entries out takes away only the words nothing else gives."""

    words: Strings
    counts: np.ndarray

    def count(self, word: str) -> int:
        at = self.words.find(word)
        return 0 if at is None else int(self.counts[at])


LEVELS = rule.CODES  # the level column: hub.registry.rule.LEVELS by position


@dataclass(frozen=True)
class Snapshot:
    """Entries in ascending artifact id order (an entry's ordinal is its position)."""

    ids: np.ndarray
    live: np.ndarray
    public: np.ndarray
    level: np.ndarray  # LEVELS
    owner: np.ndarray
    parent: np.ndarray  # the artifact a derived entry is listed under (0: none; ``SearchEntry.parent``)
    updated: np.ndarray  # seconds since the epoch
    titles: Strings
    recency: np.ndarray  # 0 for the newest (ties: lower id first)
    by_title: np.ndarray  # 0 for the first title in alphabetical order (ties: lower id first)
    facets: dict[str, Postings]
    words: Postings | None  # lexemes with their best weight, PostgreSQL only
    derived: np.ndarray  # the ordinals of derived entries (parent > 0)
    by_owner: np.ndarray  # the ordinals in owner order: owner_keys[k]'s are [owner_starts[k], owner_starts[k + 1])
    owner_keys: np.ndarray  # the owners, sorted, each once
    owner_starts: np.ndarray
    spelling: Spelling | None = None  # a base's public words (a delta's are read when asked)

    COLUMNS = ("ids", "live", "public", "level", "owner", "parent", "updated", "recency", "by_title", "derived",
               "by_owner", "owner_keys", "owner_starts")

    @property
    def size(self) -> int:
        return len(self.ids)

    def positions(self, artifact_ids: np.ndarray) -> np.ndarray:
        """Ordinals of those of ``artifact_ids`` that this snapshot holds."""
        pos, found = locate(self.ids, artifact_ids)
        return pos[found]

    def owned(self, accounts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ordinals of the entries each of ``accounts`` owns, one account after the other, and how many each
        owns: read from the owner order, so that it costs what those accounts own, not the whole index."""
        pos, found = locate(self.owner_keys, accounts)
        rows = pos[found]
        lengths = np.zeros(len(accounts), dtype=np.int64)
        lengths[found] = self.owner_starts[rows + 1] - self.owner_starts[rows]
        return self.by_owner[_ranges(self.owner_starts, rows)], lengths

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything this snapshot holds, as named arrays (``hub.search.mapped`` writes them)."""
        out = {name: getattr(self, name) for name in self.COLUMNS}
        out.update(self.titles.arrays("titles"))
        for name, postings in self.facets.items():
            out.update(postings.arrays(f"facet.{name}"))
        if self.words is not None:
            out.update(self.words.arrays("words"))
        if self.spelling is not None:
            out.update(self.spelling.words.arrays("spelling"))
            out["spelling.counts"] = self.spelling.counts
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Snapshot:
        return cls(**{name: arrays[name] for name in cls.COLUMNS}, titles=Strings.from_arrays(arrays, "titles"),
                   facets={name: Postings.from_arrays(arrays, f"facet.{name}") for name in FACETS},
                   words=Postings.from_arrays(arrays, "words") if "words.starts" in arrays else None,
                   spelling=Spelling(Strings.from_arrays(arrays, "spelling"), arrays["spelling.counts"])
                   if "spelling.counts" in arrays else None)


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


def _sorted_codes(values: list[str], codes: np.ndarray) -> tuple[list[str], np.ndarray]:
    """``values`` sorted, and ``codes`` (positions in ``values``) renumbered to match."""
    order = sorted(range(len(values)), key=values.__getitem__)
    renumber = np.empty(len(values), dtype=np.int64)
    renumber[np.asarray(order, dtype=np.int64)] = np.arange(len(values))
    return [values[i] for i in order], renumber[codes] if len(codes) else codes


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
        rows = sorted((value, np.asarray(" ".join(members).split(" "), dtype=np.int64))
                      for (facet, value), members in merged.items() if facet == name)
        members = np.concatenate([m for _, m in rows]) if rows else np.zeros(0, dtype=np.int64)
        codes = np.repeat(np.arange(len(rows)), [len(m) for _, m in rows]).astype(np.int64)
        pos, known = locate(ids, members)
        out[name] = Postings.build([value for value, _ in rows], codes[known], pos[known], len(ids))
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
    values, codes = _sorted_codes(list(vocabulary), key // max(size, 1))
    key = codes * max(size, 1) + key % max(size, 1)
    order = np.argsort(key, kind="stable")  # stable: of a lexeme's pairs for one entry, the best weight's first
    key = key[order]
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    key = key[first]
    return Postings.build(values, key // max(size, 1), key % max(size, 1), size,
                          (np.concatenate(weights) if weights else np.zeros(0, np.float32))[order][first],
                          ordered=True, counted=False)


BASE = Q(live=True)


def load(where: Q) -> Snapshot:
    """Build a snapshot of the entries ``where`` selects (their facet values and lexemes with them; a base's
    spelling words too)."""
    try:
        return _load(where)
    finally:
        if where == BASE:  # a delta frees little, and trimming walks the whole heap (tens of ms in a big process)
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
    owners = np.asarray(owner, dtype=np.int64)
    parent = np.asarray([p or 0 for p in parents], dtype=np.int64)
    by_owner = np.argsort(owners, kind="stable")
    owner_keys, owner_counts = np.unique(owners[by_owner], return_counts=True)
    updated = np.fromiter((u.timestamp() for u in updated_at), dtype=np.float64, count=size)
    words = _words(entries, size) if connection.vendor == "postgresql" else None
    snapshot = Snapshot(
        ids=ids, live=np.asarray(live, dtype=bool), public=np.asarray([v == "public" for v in visibility], dtype=bool),
        level=np.asarray([LEVELS.get(v, len(LEVELS) - 1) for v in visibility], dtype=np.int8),
        owner=owners, parent=parent, derived=np.flatnonzero(parent > 0),
        updated=updated, titles=Strings.of(titles),
        recency=_ranks(np.lexsort((ids, -updated))),
        by_title=_ranks(np.asarray(sorted(range(size), key=lambda i: (titles[i].casefold(), ids_list[i])),
                                   dtype=np.int64)),
        facets=_facets(where == BASE, ids), words=words, by_owner=by_owner.astype(np.int32), owner_keys=owner_keys,
        owner_starts=np.concatenate([[0], np.cumsum(owner_counts)]).astype(np.int64),
    )
    if where != BASE:
        return snapshot
    counts = _words_of(snapshot, snapshot.public & snapshot.live)
    spelled = sorted(counts)
    return replace(snapshot, spelling=Spelling(
        Strings.of(spelled), np.fromiter((counts[w] for w in spelled), dtype=np.int64, count=len(spelled))))


@dataclass(frozen=True)
class View:
    """What a query reads: the base snapshot (less the entries the delta overrides) and the delta."""

    generation: int
    base_generation: int
    epoch: str
    stamp: tuple[int, int] | None  # the host's base pointer as it was when this view was made
    parts: tuple[tuple[Snapshot, np.ndarray], ...]  # (snapshot, its entries that count)


def state() -> tuple[int, str]:
    """The index's generation and the database's epoch (one row)."""
    row = SearchState.objects.filter(pk=1).values_list("generation", "epoch").first()
    return (row[0], row[1]) if row else (0, "")


def generation() -> int:
    return state()[0]


def root() -> Path:
    """This host's folder of published bases (``HUB_SEARCH_INDEX_DIR``)."""
    return Path(settings.HUB_SEARCH_INDEX_DIR)


_lock = threading.Lock()
_rebuilding = threading.Event()
_view: View | None = None
_mapped: tuple[str, Snapshot] | None = None  # the host's base this process has mapped, by name


def forget() -> None:
    """Drop this process's view and mapping (tests do, after rolling the database back)."""
    global _view, _vocabulary, _mapped
    with _lock:
        _view, _vocabulary, _mapped = None, None, None


def current() -> View:
    """The index as of the database's current generation: the newest usable base (this host's, or one built in
    memory inside a transaction) and the entries changed since, loaded from the database."""
    global _view
    now, epoch = state()
    view = _view
    if view is not None and view.generation == now and view.epoch == epoch and (
            len(view.parts) == 1 or view.stamp == mapped.stamp(root())):
        return view
    with _lock:
        view = _view
        stamp = mapped.stamp(root())
        if view is None or view.generation != now or view.epoch != epoch or (
                len(view.parts) > 1 and view.stamp != stamp):
            view = _refresh(view, now, epoch, stamp)
            _view = view
        return view


def _refresh(view: View | None, now: int, epoch: str, stamp: tuple[int, int] | None) -> View:
    base, base_generation = None, -1
    if view is not None and view.epoch == epoch and view.base_generation <= now:
        base, base_generation = view.parts[0][0], view.base_generation
    shared = _host_base(epoch, now)
    if shared is not None and shared[1] > base_generation:
        base, base_generation = shared
    if base is None:
        base, base_generation = _first_base(epoch, now)
        stamp = mapped.stamp(root())
    now = max(now, base_generation)
    if base_generation == now:
        return View(now, now, epoch, stamp, ((base, base.live),))
    view = _with_delta(base, base_generation, now, epoch, stamp)
    if view.parts[1][0].size > DELTA_LIMIT:
        view = _rebuild(view)
    return view


def _host_base(epoch: str, now: int) -> tuple[Snapshot, int] | None:
    """This host's newest published base, mapped, if it was built from this database at ``now`` or before."""
    for _ in range(3):  # a base removed between reading the pointer and opening it: read the pointer again
        name = mapped.pointed(root())
        if name is None:
            return None
        built = mapped.generation_of(name)
        if name != mapped.base_name(epoch, built) or built > now:
            return None
        try:
            snapshot = _map(name)
        except FileNotFoundError:
            continue
        return None if snapshot is None else (snapshot, built)
    return None


def _map(name: str) -> Snapshot | None:
    """The published base ``name``, mapped once per process (None if another format of base wrote it)."""
    global _mapped
    if _mapped is not None and _mapped[0] == name:
        return _mapped[1]
    meta, arrays = mapped.open_base(root(), name)
    if meta.get("format") != mapped.FORMAT:
        return None
    _mapped = (name, Snapshot.from_arrays(arrays))
    return _mapped[1]


def _first_base(epoch: str, now: int) -> tuple[Snapshot, int]:
    """A base when this host has none for this database: built here in memory inside a transaction; otherwise
    by this process for the whole host, or, when another process is building it, that one's once it is ready."""
    if connection.in_atomic_block:
        return load(BASE), now
    with mapped.indexer(root(), wait=True):
        shared = _host_base(epoch, now)
        if shared is not None:
            return shared
        return _publish()


def _publish() -> tuple[Snapshot, int]:
    """Build a base from the committed entries, publish it for the host and map it (the caller holds the
    indexer lock)."""
    now, epoch = state()
    arrays = load(BASE).arrays()
    name = mapped.publish(root(), arrays, {"epoch": epoch, "generation": now, "size": len(arrays["ids"])})
    del arrays
    _release_freed_memory()
    return _map(name), now


def _with_delta(base: Snapshot, base_generation: int, now: int, epoch: str, stamp: tuple[int, int] | None) -> View:
    delta = load(Q(seq__gt=base_generation))
    overridden = np.zeros(base.size, dtype=bool)
    overridden[base.positions(delta.ids)] = True
    return View(now, base_generation, epoch, stamp, ((base, base.live & ~overridden), (delta, delta.live)))


def _rebuild(view: View) -> View:
    """A new base once the delta has grown past DELTA_LIMIT: built here inside a transaction (another
    process could not see its rows), otherwise by the host's indexer in the background while ``view`` goes on
    serving (a process that finds another one building leaves it to that one)."""
    if connection.in_atomic_block:
        base = load(BASE)
        return View(view.generation, view.generation, view.epoch, view.stamp, ((base, base.live),))
    if not _rebuilding.is_set():
        _rebuilding.set()
        threading.Thread(target=_rebuild_in_background, name="search-index-rebuild", daemon=True).start()
    return view


def _rebuild_in_background() -> None:
    try:
        with mapped.indexer(root(), wait=False) as held:
            if held:
                _publish()  # the next query of every process of the host maps it
    except Exception:  # the old view goes on serving; the next change tries again
        logger.exception("rebuilding the search index failed")
    finally:
        connection.close()
        _rebuilding.clear()


_warming = threading.Event()


def loaded() -> bool:
    """Whether this process holds a view (of some generation) to answer from (``/readyz``)."""
    return _view is not None


def held_generation() -> int | None:
    """The generation this process's view answers for (None before it is loaded): ``/metrics``."""
    view = _view
    return None if view is None else view.generation


def warm() -> None:
    """Map this host's base (or build it, the first time on a host) in the background: the web server calls
    this as it starts, ``/readyz`` too while no view is held; a call while one runs starts no other."""
    if _warming.is_set():
        return
    _warming.set()

    def build() -> None:
        try:
            current()
        except Exception:  # e.g. a database that is not migrated yet: the first search builds it
            logger.warning("could not load the search index ahead of time", exc_info=True)
        finally:
            _warming.clear()
            connection.close()
    threading.Thread(target=build, name="search-index-warm", daemon=True).start()


Matcher = Callable[[Snapshot], tuple[np.ndarray, np.ndarray]]  # (matching entries, their scores)


class Hits(Sequence):
    """The ordered result of a search: its length, and slices of SearchEntry rows fetched on demand."""

    def __init__(self, parts: list[tuple[Snapshot, np.ndarray, np.ndarray | None]], sort: str,
                 counted: list[dict[str, Rows]] | None = None) -> None:
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
            .select_related("artifact__owner", "version", "current").prefetch_related("artifact__collaborators") \
            .in_bulk()
        return [rows[i] for i in ids if i in rows]

    def facet_counts(self) -> dict[str, list[dict[str, Any]]]:
        """For each facet, its most frequent values among the hits with their counts. A facet the query
        filters on (keywords excepted: they narrow, as tags) counts its values as if it were not filtered, so
        that its other values stay there to be added as alternatives.

        Only the values that can make the list are read as text: those of a part that could still reach its
        first FACET_LIMIT with what every other part could add (a value left out of a part's candidates has
        fewer than that part's FACET_LIMIT-th count, even with the most the others hold)."""
        hits = []
        for snapshot, ords, _ in self.parts:
            mask = np.zeros(snapshot.size, dtype=bool)
            mask[ords] = True
            hits.append(Rows(mask, ords))
        out = {}
        for name in FACETS:
            counts = []
            for (snapshot, _, _), counted, rows in zip(self.parts, self.counted, hits, strict=True):
                over = counted.get(name, rows)
                counts.append((snapshot.facets[name], snapshot.facets[name].count_array(over.mask, over)))
            most = [int(array.max()) if len(array) else 0 for _, array in counts]
            totals: dict[str, int] = {}
            for i, (postings, array) in enumerate(counts):
                floor = 1
                if np.count_nonzero(array) > FACET_LIMIT:
                    floor = max(1, int(np.partition(array, -FACET_LIMIT)[-FACET_LIMIT]) - (sum(most) - most[i]))
                for code in np.flatnonzero(array >= floor):
                    value = postings.values[int(code)]
                    if value in totals:
                        continue
                    totals[value] = int(array[code])
                    for j, (other, other_array) in enumerate(counts):  # the same value in the other parts
                        found = other.values.find(value) if j != i else None
                        totals[value] += 0 if found is None else int(other_array[found])
            out[name] = [{"value": v, "count": n} for v, n in sorted(totals.items(), key=lambda i: (-i[1], i[0]))
                         if n][:FACET_LIMIT]
        return out


def _top(snapshot: Snapshot, ords: np.ndarray, scores: np.ndarray | None, sort: str, stop: int) -> np.ndarray:
    """The first ``stop`` of ``ords`` in result order (as ``Hits._key`` orders them), without sorting them all."""
    if stop <= 0 or not len(ords):
        return ords[:0]
    if sort == "name" or scores is None or sort == "new":
        key = snapshot.by_title[ords] if sort == "name" else snapshot.recency[ords]
        if stop < len(ords):
            chosen = np.argpartition(key, stop - 1)[:stop]
            return ords[chosen[np.argsort(key[chosen])]]
        return ords[np.argsort(key)]
    # relevance: best score first, then newest. The stop-th best score splits the hits into those surely in,
    # and the ties at that score, of which the newest are taken.
    negative, recency = -scores[ords], snapshot.recency[ords]
    chosen = np.arange(len(ords))
    if stop < len(ords):
        kth = np.partition(negative, stop - 1)[stop - 1]
        better, tied = np.flatnonzero(negative < kth), np.flatnonzero(negative == kth)
        need = stop - len(better)
        if need < len(tied):
            tied = tied[np.argpartition(recency[tied], need - 1)[:need]]
        chosen = np.concatenate([better, tied])
    return ords[chosen[np.lexsort((recency[chosen], negative[chosen]))]]


def search(reader: rule.Reader, filters: dict[str, list[str]], visibility: str, matcher: Matcher | None,
           sort: str, collapse: bool = True) -> Hits:
    """Entries ``reader`` may see that pass every facet
    filter, ``visibility`` and ``matcher``, in ``sort`` order. ``collapse``: leave out derived entries whose
    parent the user can see (they are listed under it)."""
    view = current()
    visible = [counted & rule.visible(snapshot, reader) for snapshot, counted in view.parts]  # the read rule
    if collapse:  # decided for every part before any is changed: what a user sees is the same either way
        hidden = []
        for (snapshot, _), mask in zip(view.parts, visible, strict=True):
            derived = snapshot.derived[mask[snapshot.derived]]
            parents, seen = snapshot.parent[derived], np.zeros(len(derived), dtype=bool)
            for (other, _), other_mask in zip(view.parts, visible, strict=True):
                pos, found = locate(other.ids, parents)
                seen[found] |= other_mask[pos[found]]
            hidden.append(derived[seen])
        for mask, ords in zip(visible, hidden, strict=True):
            mask[ords] = False
    parts, counted_parts = [], []
    for (snapshot, _), mask in zip(view.parts, visible, strict=True):
        if visibility:
            mask &= snapshot.level == LEVELS[visibility]
        scores = None
        if matcher is not None:
            matched, scores = matcher(snapshot)
            mask &= matched
        # The hits and every facet's counted entries are among those that pass so far: where they are few (words
        # matched), each set is found among them; else by a pass over the index (a read costs ~4x a pass's step).
        within = np.flatnonzero(mask) if AMONG * np.count_nonzero(mask) < snapshot.size else None
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
                over = mask.copy()
                for other, passed in by_facet.items():
                    if other != name:
                        over &= passed
                counted[name] = Rows(over) if within is None else Rows.among(over, within)
        parts.append((snapshot, np.flatnonzero(hits) if within is None else within[hits[within]], scores))
        counted_parts.append(counted)
    return Hits(parts, sort, counted_parts)


WORD = re.compile(r"[^\W\d_]{4,}")
SPELLING_FACETS = ("keyword", "framework", "format", "task")


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


@dataclass(frozen=True)
class Vocabulary:
    """The words a spelling suggestion may offer: from the titles, keywords and facet values of public, live
    entries only (a private artifact's words never reach anyone), lower case, four letters or more. The base's
    words stay in its arrays (mapped, never a set per process); a view adds its delta's and takes away the
    base words that only the entries the delta overrides gave."""

    base: Spelling | None
    removed: frozenset[str]
    added: frozenset[str]

    def __contains__(self, word: object) -> bool:
        if word in self.added:
            return True
        return isinstance(word, str) and word not in self.removed and self.base is not None \
            and self.base.count(word) > 0

    def __iter__(self) -> Iterator[str]:
        """Every word (reads the base's whole list: for checks and benches, not for a query)."""
        yield from self.added
        if self.base is not None:
            for word in self.base.words:
                if word not in self.removed and word not in self.added:
                    yield word

    def near(self, word: str, spread: int = 2) -> list[str]:
        """The words whose length is within ``spread`` letters of ``word``'s."""
        out = [w for w in self.added if abs(len(w) - len(word)) <= spread]
        if self.base is not None:
            lengths = self.base.words.lengths()  # bytes: a letter takes 1-4
            for i in np.flatnonzero(np.abs(lengths - len(word.encode())) <= 4 * spread):
                candidate = self.base.words[int(i)]
                if abs(len(candidate) - len(word)) <= spread and candidate not in self.removed:
                    out.append(candidate)
        return out


_vocabulary: tuple[View, Vocabulary] | None = None


def vocabulary() -> Vocabulary:
    """The current view's spelling vocabulary. The base's words were counted when it was built; a change (a new
    delta, which overrides a few base entries) reads only the words of the entries it touches, never every
    public title again (9-13 s at 1M entries)."""
    global _vocabulary
    view = current()
    cached = _vocabulary
    if cached is not None and cached[0] is view:
        return cached[1]
    (base, counted), removed, added = view.parts[0], set(), set()
    left_out = base.public & base.live & ~counted
    if base.spelling is not None and left_out.any():
        removed = {word for word, n in _words_of(base, left_out).items() if base.spelling.count(word) <= n}
    for snapshot, live in view.parts[1:]:
        added |= set(_words_of(snapshot, live & snapshot.public))
    words = Vocabulary(base.spelling, frozenset(removed), frozenset(added))
    _vocabulary = (view, words)
    return words
