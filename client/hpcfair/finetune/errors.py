"""Fine-tuning failures with a code and a message a scientist can act on.

A ``FinetuneError`` is a ``ConversionError``: inside the sandbox it travels through the same
``result.json`` and reaches the job as its code and fixed message (library text stays in the log)."""

from __future__ import annotations

from hpcfair.convert.errors import ConversionError


class FinetuneError(ConversionError):
    """A fine-tune that cannot start or could not finish; ``code`` is machine-readable."""


UNTRAINABLE = {
    "onnx": "an ONNX file is an inference graph without the framework's training machinery",
    "savedmodel": "a TensorFlow SavedModel keeps its graph, not a trainable Keras model",
    "pytorch": "a plain torch.save file (weights or a pickled module) needs the Python code that defines the "
                  "model, which the hub does not run",
}
UPLOAD_INSTEAD = ("Upload the original model to fine-tune: TorchScript (.pt, torch.jit.save), a torch.export "
                  "program (.pt2), Keras (.keras or .h5), a scikit-learn estimator (.skops, .pkl, .joblib), or a "
                  "Hugging Face text encoder folder (config.json, model.safetensors and its tokenizer files).")


def untrainable(name: str, fmt: str) -> FinetuneError:
    """The error for a model the hub cannot train, saying why and what to upload instead."""
    why = UNTRAINABLE.get(fmt, f"{fmt} models cannot be trained here")
    return FinetuneError("not_trainable", f"{name} cannot be fine-tuned: {why}. {UPLOAD_INSTEAD}")


def training_words(detail: str) -> str:
    """The sandbox's limit messages speak of 'the conversion'; a fine-tune trains (the hub's Celery worker and
    its Slurm runner both say so)."""
    return detail.replace("The conversion", "The fine-tune").replace("convert a smaller model", "train a smaller "
                                                                                                "model or fewer epochs")
