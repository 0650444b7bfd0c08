"""scikit-learn estimators, loaded through the hub's pickle allow-list (or skops' type check). How an epoch
trains depends on what the estimator offers, in this order:

- ``partial_fit`` (SGD, MLP, naive Bayes, ...): one pass of mini-batches per epoch;
- ``warm_start`` with ``n_estimators`` (gradient boosting, forests): each epoch adds a tenth of the base
  model's estimators, fitted on the new data;
- ``warm_start`` alone (logistic regression, ...): each epoch refits starting from the current coefficients;
- otherwise the estimator is refitted on the training split once (``epochs`` does not apply).
``freeze`` does not apply to estimators."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert.converters import load_sklearn
from hpcfair.convert.exported import versions
from hpcfair.finetune.errors import FinetuneError
from hpcfair.finetune.loop import Labels, batches
from hpcfair.finetune.spec import Hyper
from hpcfair.finetune.trainer import Inputs, Trainer


class SklearnTrainer(Trainer):
    family = "scikit-learn"

    def __init__(self, estimator, hyper: Hyper, *, fmt: str, name: str) -> None:
        from sklearn.base import is_classifier

        super().__init__(hyper)
        if hyper.freeze != "none":
            raise FinetuneError("invalid_config", "task_args.freeze: scikit-learn estimators have no layers to freeze; "
                                                  "leave freeze out (or none).")
        self.estimator, self.fmt, self.name = estimator, fmt, name
        self.classifier = is_classifier(estimator)
        params = estimator.get_params(deep=False)
        self.tuned: dict[str, Any] = {}
        if "random_state" in params:
            self.tuned["random_state"] = hyper.seed
        if hasattr(estimator, "partial_fit"):
            self.strategy = "partial_fit"
            for key in ("learning_rate_init", "eta0"):
                if key in params:
                    self.tuned[key] = hyper.learning_rate
        elif "warm_start" in params:
            self.strategy = "warm_start"
            self.tuned["warm_start"] = True
            self.step = max(1, int(params.get("n_estimators") or 0) // 10) if "n_estimators" in params else 0
        else:
            self.strategy = "refit"
            self.epochs_apply = False
        estimator.set_params(**self.tuned)

    def prepare(self, x: np.ndarray, y: np.ndarray) -> tuple[Inputs, np.ndarray]:
        # an estimator keeps the float type it was fitted with (SGD's partial_fit refuses another)
        dtype = getattr(getattr(self.estimator, "coef_", None), "dtype", np.float64)
        x = x.reshape(len(x), -1).astype(dtype if dtype in (np.float32, np.float64) else np.float64)
        if not self.classifier:
            self.labels = Labels("regression")
            return [x], y.astype(np.float64)
        known = getattr(self.estimator, "classes_", None)
        self.labels = Labels("classification", list(known) if known is not None else np.unique(y).tolist())
        return [x], self.labels.encode(y)

    def _fitted(self) -> bool:
        from sklearn.utils.validation import check_is_fitted

        try:
            check_is_fitted(self.estimator)
            return True
        except Exception:  # noqa: BLE001 - NotFittedError
            return False

    def predict(self, x: Inputs) -> np.ndarray:
        if not self._fitted():
            raise FinetuneError("not_trainable", f"{self.name} was never fitted; there is no base model to "
                                                 "fine-tune.")
        if not self.classifier:
            return np.asarray(self.estimator.predict(x[0]), dtype=np.float64)
        if hasattr(self.estimator, "predict_proba"):
            try:
                probs = np.asarray(self.estimator.predict_proba(x[0]))
                order = [list(self.estimator.classes_).index(c) for c in self.labels.classes]
                return probs[:, order]
            except (AttributeError, ValueError):
                pass
        picked = self.labels.encode(np.asarray(self.estimator.predict(x[0])))
        return np.eye(len(self.labels.classes))[picked]

    def fit_epoch(self, x: Inputs, y: np.ndarray, epoch: int) -> None:
        labels = np.asarray(self.labels.classes, dtype=object)[y].tolist() if self.classifier else y
        labels = np.asarray(labels)
        if self.strategy == "partial_fit":
            extra = {"classes": np.asarray(self.labels.classes)} if self.classifier else {}
            for rows in batches(len(y), self.hyper.batch_size, self.hyper.seed, epoch):
                self.estimator.partial_fit(x[0][rows], labels[rows], **extra)
            return
        if self.strategy == "warm_start" and self.step:
            self.estimator.set_params(n_estimators=self.estimator.get_params()["n_estimators"] + self.step)
        self.estimator.fit(x[0], labels)

    def snapshot(self) -> Any:
        return copy.deepcopy(self.estimator)

    def restore(self, state: Any) -> None:
        self.estimator = state

    def signature(self, x: Inputs) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
        sample = {"input": np.ascontiguousarray(x[0][:16], dtype=np.float32)}
        return [{"name": "input", "shape": [None, x[0].shape[1]], "dtype": "float32"}], sample

    def save(self, folder: Path) -> list[str]:
        if "warm_start" in self.tuned:
            self.estimator.set_params(warm_start=False)  # a later fit by its user starts afresh
        if self.fmt == "skops":
            import skops.io

            skops.io.dump(self.estimator, str(folder / "model.skops"))
            return ["model.skops"]
        if self.name.lower().endswith(".joblib"):
            import joblib

            joblib.dump(self.estimator, str(folder / "model.joblib"))
            return ["model.joblib"]
        with open(folder / "model.pkl", "wb") as handle:
            pickle.dump(self.estimator, handle, protocol=4)
        return ["model.pkl"]

    def hyper_extra(self) -> dict[str, Any]:
        return {"strategy": self.strategy, **self.tuned}

    @staticmethod
    def libraries() -> dict[str, str]:
        return versions("scikit-learn", "numpy", "scipy")


def load(path: Path, fmt: str, hyper: Hyper) -> SklearnTrainer:
    estimator, _ = load_sklearn(path, fmt)
    if not hasattr(estimator, "fit"):
        raise FinetuneError("not_trainable", f"{path.name} holds no scikit-learn estimator.")
    return SklearnTrainer(estimator, hyper, fmt=fmt, name=path.name)
