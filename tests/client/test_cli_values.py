"""``hpcfair infer`` prints the outputs' values, not only their shapes (issue 41, point 4): small arrays
whole, large ones shortened as numpy does."""

from __future__ import annotations

import numpy as np
import pytest
from hpcfair.cli import _summary, class_names


def test_small_outputs_show_their_values_and_large_ones_are_shortened():
    text = _summary({"label": np.array([0, 2], np.int64),
                     "probabilities": np.array([[0.9, 0.05, 0.05], [0.1, 0.2, 0.7]], np.float32),
                     "embedding": np.arange(1000, dtype=np.float32)})
    lines = text.splitlines()
    assert lines[0] == "label [2] int64: [0 2]"
    assert lines[1].startswith("probabilities [2, 3] float32: [[0.9  0.05 0.05]")
    assert "[0.1  0.2  0.7 ]]" in text
    assert "embedding [1000] float32: [  0.   1.   2. ... 997. 998. 999.]" in text


def test_class_indices_get_their_names_and_otherwise_each_row_its_most_likely_class():
    """Issue 41, point 4: the same rule as the page's "Try it" (hub.js classNames)."""
    labels = ["setosa", "versicolor", "virginica"]
    outputs = {"label": np.array([0, 2], np.int64), "probabilities": np.array([[0.9, 0.05, 0.05], [0.1, 0.2, 0.7]])}
    assert class_names(outputs, labels) == {"label": "setosa, virginica"}  # not repeated for the probabilities
    logits = {"output": np.array([[-0.4, 0.9, -0.5], [3.0, 0.1, 0.2]], np.float32)}
    assert class_names(logits, labels) == {"output": "most likely: versicolor, setosa"}
    assert class_names({"label": np.array([0, 3])}, labels) == {}  # 3 is no class index: not class indices
    assert class_names({"output": np.zeros((2, 4), np.float32)}, labels) == {}  # 4 columns, 3 classes
    assert class_names(outputs, None) == {}
    many = class_names({"label": np.zeros(30, np.int64)}, labels)["label"]
    assert many.count("setosa") == 20 and many.endswith(", …")
    text = _summary(outputs, labels).splitlines()
    assert text[:2] == ["label [2] int64: [0 2]", "  → setosa, virginica"]


@pytest.mark.slow
@pytest.mark.cpu  # converts in the sandbox
def test_a_failed_local_conversion_prints_one_line_not_the_sandbox_s_tracebacks(tmp_path):
    """The README promises one line (tracebacks with HPCFAIR_DEBUG=1); the sandbox's child's stderr, logged by
    the library, is not printed unless logging is configured."""
    import os
    import subprocess
    import sys
    import zipfile

    broken = tmp_path / "broken.pt"  # a TorchScript archive by its members: the sandbox's child fails loading it
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("m/data.pkl", b"\x80\x02}q\x00.")
        archive.writestr("m/version", "3\n")
        archive.writestr("m/code/__torch__.py", "garbage(")
        archive.writestr("m/constants.pkl", b"\x80\x02)q\x00.")
    env = {k: v for k, v in os.environ.items() if k != "HPCFAIR_DEBUG"}
    done = subprocess.run([sys.executable, "-m", "hpcfair.cli", "convert", str(broken), "--output",
                           str(tmp_path / "out.onnx")], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error ["), done.stderr
    assert "Traceback" not in done.stderr and lines[0].startswith("error [corrupt_file]")
