"""Fine-tuning (knowledge transfer): adapt a model to a dataset, the same code for a local run and for the
hub's job (where it runs inside the conversion sandbox; see ``child``).

Families: PyTorch (TorchScript, torch.export), Keras, scikit-learn (partial_fit, warm_start or refit) and
Hugging Face text encoders with a new classification head. Framework libraries are imported lazily."""

from __future__ import annotations

from hpcfair.finetune.errors import FinetuneError
from hpcfair.finetune.spec import Hyper

__all__ = ["FinetuneError", "Hyper"]
