"""What every engine shares: a matcher made from the (artifact id, score) pairs an engine found."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from hub.search import index_copy


def matched_by_ids(matches: Iterable[tuple[int, float]]) -> index_copy.Matcher:
    """A matcher from (artifact id, score) pairs an engine found, whatever the snapshot it is asked about."""
    rows = sorted(matches)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    ranks = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
    return matched_by_arrays(ids, ranks)


def matched_by_arrays(ids: np.ndarray, ranks: np.ndarray) -> index_copy.Matcher:
    """``matched_by_ids`` of the pairs as two arrays, ``ids`` ascending (an engine that hands over many matches
    at once, without a Python object for each)."""

    def matcher(snapshot: index_copy.Snapshot) -> tuple[np.ndarray, np.ndarray]:
        pos, found = index_copy.locate(snapshot.ids, ids)
        mask, scores = np.zeros(snapshot.size, dtype=bool), np.zeros(snapshot.size, dtype=np.float64)
        mask[pos[found]], scores[pos[found]] = True, ranks[found]
        return mask, scores
    return matcher
