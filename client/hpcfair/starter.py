"""The papers' examples, ready to run: ``hpcfair examples DEST`` copies the shipped configs (Listings 1, 2 and
4) and makes what they name: ``ckpt/encoder.ckpt`` (a PyTorch ``torch.export`` program, x [batch, 16] ->
[batch, 8]), ``ckpt/decoder.ckpt`` (a Keras model, [batch, 8] -> [batch, 4]) and ``input.txt`` (3 rows).
The models are small and randomly initialised with fixed seeds; making them needs ``hpcfair[convert]``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.errors import HubError

EXAMPLES = Path(__file__).with_name("examples")


def example_models(seed: int = 0) -> tuple[Any, Any]:
    """The encoder (torch.nn.Module, eval mode) and the decoder (keras.Model) of Listing 1."""
    try:
        import keras
        import torch
    except ImportError:
        raise HubError("making the example checkpoints needs PyTorch and Keras: pip install 'hpcfair[convert]'",
                       code="missing_extra")
    torch.manual_seed(seed)
    encoder = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Tanh()).eval()
    keras.utils.set_random_seed(seed)
    z = keras.Input((8,), name="z")
    decoder = keras.Model(z, keras.layers.Dense(4, name="y")(keras.layers.Dense(6, activation="relu")(z)))
    return encoder, decoder


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
    encoder, decoder = example_models(seed)
    (folder / "ckpt").mkdir(exist_ok=True)
    program = torch.export.export(encoder, (torch.randn(2, 16),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(program, str(folder / "ckpt" / "encoder.pt2"))
    (folder / "ckpt" / "encoder.pt2").replace(folder / "ckpt" / "encoder.ckpt")
    decoder.save(folder / "ckpt" / "decoder.keras")
    (folder / "ckpt" / "decoder.keras").replace(folder / "ckpt" / "decoder.ckpt")
    x = np.random.default_rng(seed).standard_normal((3, 16)).astype(np.float32)
    np.savetxt(folder / "input.txt", x)
    return folder
