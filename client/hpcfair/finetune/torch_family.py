"""PyTorch: TorchScript (.pt) and torch.export (.pt2) originals. The loaded module's own parameters are
trained with Adam; ``freeze: backbone`` leaves only the last layer's (the module owning the last registered
parameter: the final Linear's weight and bias) trainable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert.exported import versions
from hpcfair.finetune.errors import FinetuneError
from hpcfair.finetune.loop import batches, is_probability, labels_for_outputs
from hpcfair.finetune.spec import Hyper
from hpcfair.finetune.trainer import Inputs, Trainer, take

EVAL_BATCH = 1024


class TorchTrainer(Trainer):
    family = "pytorch"

    def __init__(self, module, hyper: Hyper, *, fmt: str, name: str, input_names: list[str] | None = None) -> None:
        import torch

        super().__init__(hyper)
        torch.manual_seed(hyper.seed)
        torch.use_deterministic_algorithms(True, warn_only=True)
        self.module, self.fmt, self.name = module, fmt, name
        self.input_names = input_names or ["input"]
        self.probabilities = False
        self.optimizer = None

    # --- the module -------------------------------------------------------------------------------------

    def _mode(self, training: bool) -> None:
        try:
            self.module.train(training)
        except (NotImplementedError, RuntimeError):
            pass  # an exported program's module keeps the mode it was exported in

    def _forward(self, x: Inputs):
        import torch

        return self.module(*[torch.from_numpy(np.ascontiguousarray(a)) for a in x])

    def predict(self, x: Inputs) -> np.ndarray:
        import torch

        self._mode(False)
        parts = []
        with torch.no_grad():
            for start in range(0, len(x[0]), EVAL_BATCH):
                out = self._forward([a[start:start + EVAL_BATCH] for a in x])
                out = out[0] if isinstance(out, tuple | list) else out
                parts.append(out.detach().float().cpu().numpy())
        return np.concatenate(parts)

    def outputs(self, x: Inputs) -> int:
        """How many output units the model has (probed on two rows)."""
        try:
            sample = self.predict(take(x, np.arange(min(2, len(x[0])))))
        except FinetuneError:
            raise
        except Exception as exc:  # noqa: BLE001 - the data does not fit the model
            raise FinetuneError("input_mismatch", f"{self.name} does not run on the dataset's features "
                                                  f"(shape {list(x[0].shape[1:])} per row); check task_args.features.",
                                cause=exc)
        self.probabilities = is_probability(sample) and sample.shape[1] > 1
        return int(np.prod(sample.shape[1:])) if sample.ndim > 1 else 1

    def prepare(self, x: np.ndarray, y: np.ndarray) -> tuple[Inputs, np.ndarray]:
        inputs = [x]
        self._example = [np.ascontiguousarray(a[:2]) for a in inputs]  # what a re-export traces with
        self.labels = labels_for_outputs(y, self.outputs(inputs), self.name)
        self._optimizer()
        return inputs, self.labels.encode(y)

    def _optimizer(self) -> None:
        import torch

        named = list(self.module.named_parameters())
        if not named:
            raise FinetuneError("not_trainable", f"{self.name} has no parameters to train.")
        if self.hyper.freeze == "backbone":
            last = named[-1][0].rsplit(".", 1)[0] if "." in named[-1][0] else named[-1][0]
            for name, parameter in named:
                parameter.requires_grad_(name == last or name.startswith(last + "."))
        else:
            for _, parameter in named:
                parameter.requires_grad_(True)
        trainable = [p for _, p in named if p.requires_grad]
        self.optimizer = torch.optim.Adam(trainable, lr=self.hyper.learning_rate)

    def _loss(self, out, y):
        import torch.nn.functional as F

        if self.labels.task == "regression":
            return F.mse_loss(out.reshape(y.shape), y)
        if self.probabilities:
            return F.nll_loss(out.clamp_min(1e-12).log(), y)
        return F.cross_entropy(out, y)

    def fit_epoch(self, x: Inputs, y: np.ndarray, epoch: int) -> None:
        import torch

        self._mode(True)
        target = torch.from_numpy(y)
        for rows in batches(len(y), self.hyper.batch_size, self.hyper.seed, epoch):
            self.optimizer.zero_grad()
            out = self._forward(take(x, rows))
            out = out[0] if isinstance(out, tuple | list) else out
            loss = self._loss(out, target[rows])
            loss.backward()
            self.optimizer.step()

    def snapshot(self) -> Any:
        return {k: v.detach().clone() for k, v in self.module.state_dict().items()}

    def restore(self, state: Any) -> None:
        self.module.load_state_dict(state)

    def parameters(self) -> dict[str, int]:
        params = list(self.module.parameters())
        trainable = sum(p.numel() for p in params if p.requires_grad)
        return {"trainable": int(trainable), "frozen": int(sum(p.numel() for p in params) - trainable)}

    def signature(self, x: Inputs) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
        rows = np.arange(min(16, len(x[0])))
        sample = {name: np.ascontiguousarray(a[rows]) for name, a in zip(self.input_names, x, strict=True)}
        specs = [{"name": n, "shape": [None, *a.shape[1:]], "dtype": a.dtype.name} for n, a in sample.items()]
        return specs, sample

    def save(self, folder: Path) -> list[str]:
        import torch

        self._mode(False)
        if self.fmt == "torchscript":
            torch.jit.save(self.module, str(folder / "model.pt"))
            return ["model.pt"]
        return [self._export(folder)]

    def _export(self, folder: Path) -> str:
        import torch

        example = tuple(torch.from_numpy(a) for a in self._example)
        batch = torch.export.Dim("batch", min=1)
        try:
            program = torch.export.export(self.module, example, dynamic_shapes=tuple({0: batch} for _ in example))
        except Exception:  # noqa: BLE001 - a model that only exports with a static batch
            program = torch.export.export(self.module, example)
        torch.export.save(program, str(folder / "model.pt2"))
        return "model.pt2"

    @staticmethod
    def libraries() -> dict[str, str]:
        return versions("torch", "numpy")


def load(path: Path, fmt: str, hyper: Hyper, metadata_inputs: list[dict[str, Any]] | None) -> TorchTrainer:
    """A TorchScript file or a torch.export program, loaded for training."""
    import torch

    names = [str(s.get("name")) for s in metadata_inputs or [] if isinstance(s, dict) and s.get("name")] or None
    try:
        if fmt == "torchscript":
            module = torch.jit.load(str(path), map_location="cpu")
        else:
            module = torch.export.load(str(path)).module()
    except Exception as exc:  # noqa: BLE001 - its text stays in the log
        raise FinetuneError("corrupt_file", f"{path.name} could not be loaded by torch for training.", cause=exc)
    return TorchTrainer(module, hyper, fmt=fmt, name=path.name, input_names=names)
