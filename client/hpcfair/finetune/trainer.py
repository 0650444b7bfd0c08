"""The interface each family implements; ``run`` drives every family through the same epochs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.finetune.loop import Labels
from hpcfair.finetune.spec import Hyper

Inputs = list[np.ndarray]  # the model's input arrays, rows along the first axis


def take(x: Inputs, rows: np.ndarray) -> Inputs:
    return [array[rows] for array in x]


class Trainer(ABC):
    """A loaded model being fine-tuned."""

    family: str = ""
    labels: Labels
    strategy: str = "gradient descent"
    epochs_apply: bool = True  # False when the family fits once (a refitted estimator)

    def __init__(self, hyper: Hyper) -> None:
        self.hyper = hyper

    @abstractmethod
    def prepare(self, x: np.ndarray, y: np.ndarray) -> tuple[Inputs, np.ndarray]:
        """The model's inputs for the dataset's features (or texts), and the target encoded; sets ``labels``."""

    @abstractmethod
    def predict(self, x: Inputs) -> np.ndarray:
        """Raw outputs (logits, probabilities or values) for every row."""

    @abstractmethod
    def fit_epoch(self, x: Inputs, y: np.ndarray, epoch: int) -> None:
        """One pass over the training rows."""

    @abstractmethod
    def snapshot(self) -> Any:
        """The current weights (to go back to the best epoch)."""

    @abstractmethod
    def restore(self, state: Any) -> None: ...

    @abstractmethod
    def save(self, folder: Path) -> list[str]:
        """Write the fine-tuned model into ``folder`` in its own format; returns the files written, model first."""

    @abstractmethod
    def signature(self, x: Inputs) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
        """The saved model's input specs (dynamic first axis) and sample inputs keyed by input name."""

    def parameters(self) -> dict[str, int]:
        """Trainable and frozen parameter counts (where the family has such a notion)."""
        return {}

    @staticmethod
    def libraries() -> dict[str, str]:
        return {}
