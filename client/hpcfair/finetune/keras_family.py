"""Keras (.keras, .h5): the model is loaded without its compiled state and trained with Adam;
``freeze: backbone`` leaves only the last layer that has weights trainable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert.exported import versions
from hpcfair.finetune.errors import FinetuneError
from hpcfair.finetune.loop import batches, labels_for_outputs
from hpcfair.finetune.spec import Hyper
from hpcfair.finetune.trainer import Inputs, Trainer


class KerasTrainer(Trainer):
    family = "keras"

    def __init__(self, model, hyper: Hyper, *, fmt: str, name: str) -> None:
        super().__init__(hyper)
        self.model, self.fmt, self.name = model, fmt, name
        self.input_name = getattr(model.inputs[0], "name", "input") if getattr(model, "inputs", None) else "input"

    def prepare(self, x: np.ndarray, y: np.ndarray) -> tuple[Inputs, np.ndarray]:
        import keras

        try:
            probe = np.asarray(self.model(x[:2], training=False))
        except Exception as exc:  # noqa: BLE001
            raise FinetuneError("input_mismatch", f"{self.name} does not run on the dataset's features (shape "
                                                  f"{list(x.shape[1:])} per row); check task_args.features.", cause=exc)
        self.labels = labels_for_outputs(y, int(np.prod(probe.shape[1:])), self.name)
        layers = [layer for layer in self.model.layers if layer.weights]
        if not layers:
            raise FinetuneError("not_trainable", f"{self.name} has no weights to train.")
        for layer in self.model.layers:
            layer.trainable = self.hyper.freeze != "backbone" or layer is layers[-1]
        activation = getattr(getattr(layers[-1], "activation", None), "__name__", "")
        if self.labels.task == "regression":
            loss = keras.losses.MeanSquaredError()
        else:
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=activation != "softmax")
        self.model.compile(optimizer=keras.optimizers.Adam(learning_rate=self.hyper.learning_rate), loss=loss)
        return [x], self.labels.encode(y)

    def predict(self, x: Inputs) -> np.ndarray:
        return np.asarray(self.model.predict(x[0], batch_size=1024, verbose=0))

    def fit_epoch(self, x: Inputs, y: np.ndarray, epoch: int) -> None:
        for rows in batches(len(y), self.hyper.batch_size, self.hyper.seed, epoch):
            self.model.train_on_batch(x[0][rows], y[rows])

    def snapshot(self) -> Any:
        return [np.array(w) for w in self.model.get_weights()]

    def restore(self, state: Any) -> None:
        self.model.set_weights(state)

    def parameters(self) -> dict[str, int]:
        trainable = sum(int(np.prod(w.shape)) for w in self.model.trainable_weights)
        frozen = sum(int(np.prod(w.shape)) for w in self.model.non_trainable_weights)
        return {"trainable": trainable, "frozen": frozen}

    def signature(self, x: Inputs) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
        sample = {self.input_name: np.ascontiguousarray(x[0][:16])}
        return [{"name": self.input_name, "shape": [None, *x[0].shape[1:]], "dtype": "float32"}], sample

    def save(self, folder: Path) -> list[str]:
        for layer in self.model.layers:
            layer.trainable = True  # a reloaded model should train as a whole again
        name = "model.h5" if self.fmt == "keras-h5" else "model.keras"
        self.model.save(str(folder / name))
        return [name]

    @staticmethod
    def libraries() -> dict[str, str]:
        return versions("keras", "tensorflow-cpu", "tensorflow", "numpy")


def load(path: Path, fmt: str, hyper: Hyper) -> KerasTrainer:
    import keras

    keras.utils.set_random_seed(hyper.seed)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    try:
        model = keras.models.load_model(str(path), compile=False, safe_mode=True)
    except Exception as exc:  # noqa: BLE001
        raise FinetuneError("corrupt_file", f"{path.name} could not be loaded by Keras for training (a model with "
                                            "custom layers needs their code, which the hub does not run).", cause=exc)
    return KerasTrainer(model, hyper, fmt=fmt, name=path.name)
