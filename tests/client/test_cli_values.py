"""``hpcfair infer`` prints the outputs' values, not only their shapes (issue 41, point 4): small arrays
whole, large ones shortened as numpy does."""

from __future__ import annotations

import numpy as np
from hpcfair.cli import _summary


def test_small_outputs_show_their_values_and_large_ones_are_shortened():
    text = _summary({"label": np.array([0, 2], np.int64),
                     "probabilities": np.array([[0.9, 0.05, 0.05], [0.1, 0.2, 0.7]], np.float32),
                     "embedding": np.arange(1000, dtype=np.float32)})
    lines = text.splitlines()
    assert lines[0] == "label [2] int64: [0 2]"
    assert lines[1].startswith("probabilities [2, 3] float32: [[0.9  0.05 0.05]")
    assert "[0.1  0.2  0.7 ]]" in text
    assert "embedding [1000] float32: [  0.   1.   2. ... 997. 998. 999.]" in text
