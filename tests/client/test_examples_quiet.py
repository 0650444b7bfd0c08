"""``hpcfair examples DIR`` prints its one line on stdout and nothing on stderr: TensorFlow, which saving the
example's Keras decoder loads, starts in a child process whose start-up lines (absl, oneDNN) are not shown;
the command's own process never imports it."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.cpu]  # its own processes only: beside others in the parallel run


def test_examples_prints_no_tensorflow_noise_and_its_checkpoints_convert(tmp_path):
    done = subprocess.run([sys.executable, "-m", "hpcfair.cli", "examples", str(tmp_path / "papers")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith(f"examples in {tmp_path / 'papers'}")
    assert {p.name for p in (tmp_path / "papers" / "ckpt").iterdir()} == {"encoder.ckpt", "decoder.ckpt"}
    ran = subprocess.run([sys.executable, "-m", "hpcfair.cli", "run", "conversion.yaml", "--json"],
                         cwd=tmp_path / "papers", capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    assert '"format": "keras"' in ran.stdout and ran.stdout.count('"verified": true') == 2

    in_process = ("import sys\nfrom hpcfair.cli import app\n"
                  f"app(['examples', {str(tmp_path / 'again')!r}], standalone_mode=False)\n"
                  "print('tensorflow' in sys.modules, 'keras' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", in_process], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "False False", done.stdout + done.stderr
