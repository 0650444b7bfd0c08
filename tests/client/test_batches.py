"""Rows per batch of a run over a dataset (``hpcfair.batches``), shared by the Celery worker and the Slurm
node: what was asked, else as many rows as fit the input budget, within 64-65,536."""

from __future__ import annotations

import numpy as np
from hpcfair.batches import MAX_ROWS, MIN_ROWS, rows_per_batch


def test_what_was_asked_wins():
    assert rows_per_batch({"x": np.zeros((10, 784), np.float32)}, asked=32) == 32


def test_the_budget_sets_the_rows_from_the_inputs_row_size():
    arrays = {"x": np.zeros((10, 784), np.float32), "k": np.zeros((10, 1), np.int64)}  # 3,144 bytes a row
    assert rows_per_batch(arrays, budget=16 * 2**20) == 16 * 2**20 // 3144
    assert rows_per_batch({"image": np.zeros((2, 3, 512, 512), np.float32)}, budget=16 * 2**20) == MIN_ROWS
    assert rows_per_batch({"x": np.zeros((5, 1), np.uint8)}, budget=16 * 2**20) == MAX_ROWS
