"""The hyper-parameters of a fine-tune, checked once, the same way for local runs, the API and the job."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from hpcfair.finetune.errors import FinetuneError

FREEZE = ("none", "backbone")
LIMITS = {"epochs": (1, 1000), "batch_size": (1, 65536), "early_stopping": (0, 1000), "max_length": (4, 512)}


@dataclass(frozen=True)
class Hyper:
    """What a fine-tune does.

    ``freeze: backbone`` trains only the model's last layer (its final weight and bias: the last Linear or
    Dense layer, a Hugging Face encoder's new classification head); every other parameter keeps its value.
    ``early_stopping: N`` stops after N epochs without a lower validation loss and keeps the best epoch's
    weights; 0 trains every epoch."""

    target: str
    epochs: int = 5
    learning_rate: float = 1e-3
    batch_size: int = 32
    freeze: str = "none"
    validation_split: float = 0.2
    seed: int = 0
    early_stopping: int = 0
    features: tuple[str, ...] | None = None
    text: str | None = None
    max_length: int = 64

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Hyper:
        """Validate ``values`` (unknown keys are ignored: the config's other keys share the group)."""
        known = {name: values[name] for name in cls.__dataclass_fields__ if values.get(name) is not None}
        if not isinstance(known.get("target"), str) or not known["target"].strip():
            raise _bad("target", "name the column (CSV, Parquet, Croissant) or array (NPZ) to learn")
        for name, (low, high) in LIMITS.items():
            value = known.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not low <= value <= high):
                raise _bad(name, f"must be a whole number from {low} to {high}")
        if "seed" in known and (isinstance(known["seed"], bool) or not isinstance(known["seed"], int)
                                or not 0 <= known["seed"] < 2**32):
            raise _bad("seed", "must be a whole number from 0 to 4294967295")
        rate = known.get("learning_rate")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)
                                 or not math.isfinite(rate) or not 0 < rate <= 10):
            raise _bad("learning_rate", "must be a number above 0 and at most 10")
        split = known.get("validation_split")
        if split is not None and (isinstance(split, bool) or not isinstance(split, int | float)
                                  or not 0 < split < 1):
            raise _bad("validation_split", "must be a fraction between 0 and 1, e.g. 0.2")
        if known.get("freeze", "none") not in FREEZE:
            raise _bad("freeze", f"use {' or '.join(FREEZE)}")
        features = known.get("features")
        if features is not None:
            if isinstance(features, str):
                features = [features]
            if not isinstance(features, list | tuple) or not features or not all(isinstance(f, str) for f in features):
                raise _bad("features", "must be a list of column (or array) names")
            known["features"] = tuple(features)
            if known["target"] in known["features"]:
                raise _bad("features", f"{known['target']!r} is the target; it cannot be a feature too")
        if "text" in known and not isinstance(known["text"], str):
            raise _bad("text", "must name the dataset's text column")
        if "learning_rate" in known:
            known["learning_rate"] = float(known["learning_rate"])
        if "validation_split" in known:
            known["validation_split"] = float(known["validation_split"])
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["features"] = list(self.features) if self.features else None
        return {key: value for key, value in out.items() if value is not None}

    def hyperparameters(self) -> dict[str, Any]:
        """The record kept in the result's metadata (``hyperparameters``)."""
        return {key: value for key, value in self.to_dict().items() if key not in ("target", "features", "text")}


def _bad(key: str, message: str) -> FinetuneError:
    return FinetuneError("invalid_config", f"task_args.{key}: {message}.")
