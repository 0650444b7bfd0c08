"""The organizations' masks of the index's read rule (``index_copy.owned_by``) agree with ``np.isin``."""

from __future__ import annotations

import numpy as np
import pytest

from hub.search.index_copy import owned_by


@pytest.mark.parametrize("seed", range(5))
def test_owned_by_is_isin(seed):
    rng = np.random.default_rng(seed)
    owner = rng.integers(1, 3000, size=int(rng.integers(0, 5000))).astype(np.int64)
    accounts = np.sort(rng.choice(np.arange(1, 4000), size=int(rng.integers(0, 60)), replace=False)).astype(np.int64)
    assert np.array_equal(owned_by(owner, accounts), np.isin(owner, accounts))


def test_accounts_beyond_every_owner_and_none():
    owner = np.array([3, 1, 3, 2], dtype=np.int64)
    assert owned_by(owner, np.array([3, 99], dtype=np.int64)).tolist() == [True, False, True, False]
    assert owned_by(owner, np.zeros(0, dtype=np.int64)).tolist() == [False] * 4
    assert owned_by(np.zeros(0, dtype=np.int64), np.array([1], dtype=np.int64)).tolist() == []
