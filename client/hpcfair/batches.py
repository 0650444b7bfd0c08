"""How many rows a batch run over a dataset takes at a time, the same on a Celery worker and on a Slurm
node: what the user asked, or as many rows as fit a budget of input bytes (issue 39: a fixed 64 rows made
a 200,000-row job pay 3,125 round trips)."""

from __future__ import annotations

import numpy as np

BUDGET_BYTES = 16 * 2**20  # inputs per batch when none is asked for (HUB_INFER_BATCH_MB on a hub)
MIN_ROWS, MAX_ROWS = 64, 65536


def rows_per_batch(arrays: dict[str, np.ndarray], asked: int = 0, budget: int = BUDGET_BYTES) -> int:
    """``asked`` when given (above 0), else the rows whose inputs fit ``budget`` bytes, from 64 to 65,536."""
    if asked > 0:
        return asked
    row = sum(array.nbytes // max(array.shape[0], 1) for array in arrays.values() if array.ndim)
    return max(MIN_ROWS, min(MAX_ROWS, budget // max(row, 1)))
