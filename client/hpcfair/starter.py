"""The papers' examples, ready to run: ``hpcfair examples DEST`` copies the shipped configs (Listings 1, 2 and
4) and makes what they name: ``ckpt/encoder.ckpt`` (a PyTorch ``torch.export`` program, x [batch, 16] ->
[batch, 8]), ``ckpt/decoder.ckpt`` (a Keras model, [batch, 8] -> [batch, 4]) and ``input.txt`` (3 rows).
The models are small and randomly initialised with fixed seeds; making them needs ``hpcfair[convert]``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.errors import HubError

EXAMPLES = Path(__file__).with_name("examples")


def example_encoder(seed: int = 0) -> Any:
    """The encoder of Listing 1 (a torch.nn.Module in eval mode)."""
    try:
        import torch
    except ImportError:
        raise HubError("making the example checkpoints needs PyTorch and Keras: pip install 'hpcfair[convert]'",
                       code="missing_extra")
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Tanh()).eval()


# The decoder of Listing 1, saved by a child process: saving a Keras model imports TensorFlow whatever Keras'
# backend is, and TensorFlow prints its start-up lines on stderr, which the command must not show.
DECODER = """
import sys

import keras
import numpy as np

path, seed = sys.argv[1], int(sys.argv[2])
z = keras.Input((8,), name="z")
hidden, head = keras.layers.Dense(6, activation="relu"), keras.layers.Dense(4, name="y")
decoder = keras.Model(z, head(hidden(z)))
rng = np.random.default_rng(seed)
for layer in (hidden, head):
    layer.set_weights([(rng.standard_normal(w.shape) * 0.5).astype(np.float32) for w in layer.get_weights()])
decoder.save(path)
"""


def write_decoder(path: Path, seed: int = 0) -> Path:
    """The decoder of Listing 1 (a keras.Model, [batch, 8] -> [batch, 4]) saved at ``path`` (``.keras``)."""
    done = subprocess.run([sys.executable, "-c", DECODER, str(path), str(seed)], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        if "No module named 'keras'" in done.stderr or "No module named 'tensorflow'" in done.stderr:
            raise HubError("making the example checkpoints needs PyTorch and Keras: pip install 'hpcfair[convert]'",
                           code="missing_extra")
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise HubError(f"the example decoder could not be made with Keras: {last}", code="examples_failed")
    return path


def make_examples(dest: str | Path, seed: int = 0) -> Path:
    """Copy the examples into ``dest`` (made if missing; existing files are kept) and write the checkpoints and
    the input that Listing 1 and 2 name. Returns ``dest``."""
    import torch

    folder = Path(dest).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    for example in EXAMPLES.iterdir():
        if example.name == "__pycache__" or (folder / example.name).exists():
            continue
        if example.is_dir():
            shutil.copytree(example, folder / example.name)
        else:
            shutil.copyfile(example, folder / example.name)
    encoder = example_encoder(seed)
    (folder / "ckpt").mkdir(exist_ok=True)
    program = torch.export.export(encoder, (torch.randn(2, 16),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(program, str(folder / "ckpt" / "encoder.pt2"))
    (folder / "ckpt" / "encoder.pt2").replace(folder / "ckpt" / "encoder.ckpt")
    write_decoder(folder / "ckpt" / "decoder.keras", seed)
    (folder / "ckpt" / "decoder.keras").replace(folder / "ckpt" / "decoder.ckpt")
    x = np.random.default_rng(seed).standard_normal((3, 16)).astype(np.float32)
    np.savetxt(folder / "input.txt", x)
    return folder
