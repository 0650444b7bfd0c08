"""Every "Use it" snippet a model's page shows runs as shown (issue 41, point 3): taken from the demo
model's page on the embedded hub (two outputs, ``label`` and ``probabilities``), saved under the names the
page gives, and run as a user would, the Python as a program and the command line as a process."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import subprocess
import sys
import time

import numpy as np
import pytest
import requests

pytestmark = pytest.mark.slow


def shown(page: str, block: str) -> str:
    found = re.search(rf'<pre id="{block}">(.*?)</pre>', page, re.S)
    assert found, f"the page shows no {block}"
    return html.unescape(found.group(1))


def test_the_use_it_snippets_of_a_model_page_run_as_shown(embedded_hub, tmp_path):
    base, token, _ = embedded_hub
    api = f"{base}/api/v1/artifacts/demo/iris-classifier"
    deadline = time.monotonic() + 240
    while requests.get(f"{api}/versions/1.0-onnx/", timeout=30).status_code != 200:  # converted at start
        assert time.monotonic() < deadline, "the demo model was not converted in time"
        time.sleep(2)
    pid = requests.get(f"{api}/", timeout=30).json()["pid"]
    page = requests.get(f"{base}/{pid}", headers={"Accept": "text/html"}, timeout=30).text
    names = re.search(r"With a config \(<code>(.*?)</code>\)", page).group(1)
    input_name = re.search(r"The input \(<code>(.*?)</code>\)", page).group(1)
    (tmp_path / names).write_text(shown(page, "use-yaml"))
    (tmp_path / input_name).write_text(shown(page, "use-input"))
    assert "output.npy" not in page  # one array only: the client refuses it for two outputs
    env = {**os.environ, "HPCFAIR_ENDPOINT": base, "HPCFAIR_TOKEN": token}

    def run(command: list[str]) -> str:
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    printed = run([sys.executable, "-c", shown(page, "use-python")])
    assert "label" in printed and "probabilities" in printed
    with np.load(tmp_path / "outputs.npz") as saved:
        assert sorted(saved.files) == ["label", "probabilities"]
    (tmp_path / "outputs.npz").unlink()

    loaded = run([sys.executable, "-c", shown(page, "use-load")])
    assert "label" in loaded and "probabilities" in loaded

    words = shlex.split(shown(page, "use-cli"))
    assert words[0] == "hpcfair"
    printed = run([sys.executable, "-m", "hpcfair.cli", *words[1:]])  # the `hpcfair` command, from this environment
    # Issue 41, point 4: the class's name (the dataset it was trained on names them) beside the label's value
    assert re.search(r"^label \[1\] int64: \[\d\]\n  → (setosa|versicolor|virginica)$", printed, re.M), printed
    with np.load(tmp_path / "outputs.npz") as saved:
        assert sorted(saved.files) == ["label", "probabilities"] and saved["label"].shape == (1,)
    assert json.loads(shown(page, "use-input")) == {"X": [[0.0, 0.0, 0.0, 0.0]]}
