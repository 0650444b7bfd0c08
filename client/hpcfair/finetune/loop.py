"""What every family's training loop shares: labels, metrics (computed the same way, in numpy, for every
family), the epoch record, early stopping, and seeding."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpcfair.finetune.errors import FinetuneError

Report = Callable[[dict[str, Any]], None]  # hears each epoch's record


@dataclass
class Labels:
    """The target as the model learns it: class indices (classification) or float32 values (regression)."""

    task: str  # "classification" | "regression"
    classes: list[Any] = field(default_factory=list)  # class index -> the dataset's label

    def encode(self, y: np.ndarray) -> np.ndarray:
        if self.task == "regression":
            return y.astype(np.float32).reshape(len(y), -1)
        index = {label: i for i, label in enumerate(self.classes)}
        unknown = [v for v in np.unique(y).tolist() if v not in index]
        if unknown:
            raise FinetuneError("label_mismatch", f"The target has labels the model does not know: {unknown[:5]}.")
        return np.array([index[v] for v in y.tolist()], dtype=np.int64)


def labels_for_outputs(y: np.ndarray, outputs: int, name: str) -> Labels:
    """Labels for a network with ``outputs`` output units: one unit is regression; k units are k classes,
    labelled 0..k-1 in the data (the base model's own class order) or by k or fewer other values (sorted)."""
    if outputs == 1:
        if not np.issubdtype(y.dtype, np.number):
            raise FinetuneError("label_mismatch", f"{name} has one output (regression) but the target is not numeric.")
        return Labels("regression")
    values = np.unique(y).tolist()
    if np.issubdtype(y.dtype, np.integer) and min(values) >= 0 and max(values) < outputs:
        return Labels("classification", list(range(outputs)))
    if len(values) > outputs:
        raise FinetuneError("label_mismatch", f"The target has {len(values)} classes but {name} has {outputs} outputs; "
                                              "fine-tune a model with as many outputs as classes.")
    return Labels("classification", values)


def evaluate(labels: Labels, outputs: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Loss and the task's metric of ``outputs`` against encoded ``y``: cross-entropy and accuracy (logits or
    probabilities), or mean squared error and R²."""
    outputs = np.asarray(outputs, dtype=np.float64)
    if labels.task == "regression":
        outputs = outputs.reshape(y.shape)
        error = float(np.mean((outputs - y) ** 2))
        spread = float(np.mean((y - y.mean(axis=0)) ** 2))
        return {"loss": error, "r2": 1 - error / spread if spread > 0 else 0.0}
    probs = outputs if is_probability(outputs) else _softmax(outputs)
    picked = np.clip(probs[np.arange(len(y)), y], 1e-12, 1.0)
    return {"loss": float(-np.mean(np.log(picked))), "accuracy": float(np.mean(probs.argmax(axis=1) == y))}


def is_probability(outputs: np.ndarray) -> bool:
    return bool(outputs.ndim == 2 and np.all(outputs >= 0) and np.allclose(outputs.sum(axis=1), 1, atol=1e-4))


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def metric_name(labels: Labels) -> str:
    return "accuracy" if labels.task == "classification" else "r2"


def epoch_record(epoch: int, train: dict[str, float], val: dict[str, float], seconds: float) -> dict[str, Any]:
    return {"epoch": epoch, **{f"train_{k}": round(v, 6) for k, v in train.items()},
            **{f"val_{k}": round(v, 6) for k, v in val.items()}, "seconds": round(seconds, 3)}


def describe(record: dict[str, Any], epochs: int) -> str:
    """One log line per epoch: 'epoch 2/5: train loss 0.412 accuracy 0.84 | validation loss 0.45 accuracy 0.8'."""
    def part(prefix: str) -> str:
        return " ".join(f"{k[len(prefix):]} {v:.4g}" for k, v in record.items() if k.startswith(prefix))
    return f"epoch {record['epoch']}/{epochs}: train {part('train_')} | validation {part('val_')} " \
           f"({record['seconds']:.2f} s)"


class EarlyStopping:
    """Stop after ``patience`` epochs without a lower validation loss (0: never); remembers the best epoch."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.best_loss = float("inf")
        self.best_epoch = 0
        self.stopped = False

    def improved(self, epoch: int, val_loss: float) -> bool:
        """Record ``epoch``; True when it is the best so far (its weights should be kept)."""
        if val_loss < self.best_loss - 1e-12:
            self.best_loss, self.best_epoch = val_loss, epoch
            return True
        if self.patience and epoch - self.best_epoch >= self.patience:
            self.stopped = True
        return False


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)


def batches(rows: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Shuffled mini-batch indices for ``epoch``, the same for the same seed."""
    order = np.random.default_rng([seed, epoch]).permutation(rows)
    return [order[i:i + batch_size] for i in range(0, rows, batch_size)]
