"""Hugging Face text encoders (a folder with config.json, the weights and the tokenizer files): a new
classification head (mean pooling over the tokens, then one Linear layer) is put on the pretrained encoder
and both are trained with AdamW; ``freeze: backbone`` trains the head alone. The result is saved as
TorchScript (``model.pt``, inputs ``input_ids`` and ``attention_mask``), which the hub converts to ONNX like
any upload, with the tokenizer files beside it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert.exported import versions
from hpcfair.finetune.errors import FinetuneError
from hpcfair.finetune.loop import Labels
from hpcfair.finetune.spec import Hyper
from hpcfair.finetune.torch_family import TorchTrainer
from hpcfair.finetune.trainer import Inputs

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json",
                   "merges.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model")


def is_hf_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file() and any(
        (path / name).is_file() for name in ("model.safetensors", "pytorch_model.bin"))


def _classifier(encoder, classes: int):
    import torch

    class EncoderClassifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder
            self.head = torch.nn.Linear(encoder.config.hidden_size, classes)

        def forward(self, input_ids, attention_mask):
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
            return self.head(pooled)

    return EncoderClassifier()


class HFTrainer(TorchTrainer):
    family = "huggingface"

    def __init__(self, folder: Path, hyper: Hyper) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        if not hyper.text:
            raise FinetuneError("invalid_config", "task_args.text: name the dataset's text column for a text model.")
        torch.manual_seed(hyper.seed)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            encoder = AutoModel.from_pretrained(str(folder), local_files_only=True, attn_implementation="eager",
                                                use_safetensors=(folder / "model.safetensors").is_file())
        except Exception as exc:  # noqa: BLE001
            raise FinetuneError("corrupt_file", "The Hugging Face folder could not be loaded as a text encoder with "
                                                "its tokenizer (config.json, weights, tokenizer files).", cause=exc)
        self.folder, self.encoder = folder, encoder
        super().__init__(None, hyper, fmt="torchscript", name=folder.name or "encoder",
                         input_names=["input_ids", "attention_mask"])

    def prepare(self, x: np.ndarray, y: np.ndarray) -> tuple[Inputs, np.ndarray]:
        import torch

        values = np.unique(y).tolist()
        if len(values) < 2:
            raise FinetuneError("label_mismatch", "The target has one class only; a classifier needs two or more.")
        self.labels = Labels("classification", values)
        torch.manual_seed(self.hyper.seed)
        self.module = _classifier(self.encoder, len(values))
        tokens = self.tokenizer([str(t) for t in x.tolist()], padding="max_length", truncation=True,
                                max_length=self.hyper.max_length, return_tensors="np")
        inputs = [tokens["input_ids"].astype(np.int64), tokens["attention_mask"].astype(np.int64)]
        self._example = [a[:2] for a in inputs]
        self._optimizer()
        return inputs, self.labels.encode(y)

    def _optimizer(self) -> None:
        import torch

        for parameter in self.encoder.parameters():
            parameter.requires_grad_(self.hyper.freeze != "backbone")
        trainable = [p for p in self.module.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=self.hyper.learning_rate)

    def save(self, folder: Path) -> list[str]:
        import torch

        self._mode(False)
        example = tuple(torch.from_numpy(a) for a in self._example)
        try:
            traced = torch.jit.trace(self.module, example, check_trace=False)
        except Exception as exc:  # noqa: BLE001
            raise FinetuneError("save_failed", "The fine-tuned text model could not be saved as TorchScript.",
                                cause=exc)
        traced.save(str(folder / "model.pt"))
        written = ["model.pt"]
        for name in TOKENIZER_FILES:
            if (self.folder / name).is_file():
                shutil.copyfile(self.folder / name, folder / name)
                written.append(name)
        return written

    def signature(self, x: Inputs) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
        specs, sample = super().signature(x)
        high = int(getattr(self.encoder.config, "vocab_size", 0)) - 1
        for spec in specs:
            spec["shape"] = [None, self.hyper.max_length]
            spec.update({"low": 0, "high": high if spec["name"] == "input_ids" else 1})
        return specs, sample

    @staticmethod
    def libraries() -> dict[str, str]:
        return versions("torch", "transformers", "tokenizers", "numpy")
