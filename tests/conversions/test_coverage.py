"""The models scientists actually bring (issue 21): each converts to a verified ONNX file in the real
sandbox, or fails with a code and a message that names the file, the cause and what to do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hpcfair.convert import ConversionError, convert_file

from tests.conversions import models

pytestmark = pytest.mark.slow


def test_single_npy_sample_feeds_a_single_input_sklearn_model(tmp_path: Path):
    name, _ = models.random_forest(tmp_path)
    np.save(tmp_path / "sample.npy", np.random.default_rng(1).normal(size=(7, 4)))  # float64, unnamed
    report = convert_file(tmp_path / name, tmp_path / "forest.onnx", sample_inputs=tmp_path / "sample.npy")
    check = report["verification"]
    assert check["passed"] is True and check["compared"] is True
    assert check["runs"][0]["inputs"]["X"] == {"shape": [7, 4], "dtype": "float32", "source": "sample inputs"}
    np.save(tmp_path / "wrong.npy", np.zeros((3, 4), dtype=np.complex64))
    with pytest.raises(ConversionError) as caught:
        convert_file(tmp_path / name, tmp_path / "forest.onnx", sample_inputs=tmp_path / "wrong.npy")
    assert caught.value.code == "invalid_sample_inputs" and "wrong.npy" in caught.value.detail
    assert "astype" in caught.value.detail
