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

    def matcher(snapshot: index_copy.Snapshot) -> tuple[np.ndarray, np.ndarray]:
        pos, found = index_copy.locate(snapshot.ids, ids)
        mask, scores = np.zeros(snapshot.size, dtype=bool), np.zeros(snapshot.size, dtype=np.float64)
        mask[pos[found]], scores[pos[found]] = True, ranks[found]
        return mask, scores
    return matcher
