"""Every scikit-learn estimator that skl2onnx converts, fitted on small data.

The pickle allow-list (``pickle_allowlist.py``) is generated from these fitted estimators by
``scripts/pickle_allowlist.py`` and tested against them in ``tests/conversions/test_pickles.py``, so an
ordinary estimator a scientist pickles always passes the scan. Besides the defaults, the variants cover
what changes the classes a pickle names: string labels (object arrays), pandas column names, a
``RandomState`` instance, each loss, each neighbours index and each Gaussian-process kernel.
Needs scikit-learn and skl2onnx (the ``convert`` extra); imported only by the generator, tests and benches.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Example:
    """One fitted estimator: ``name`` is the class name, ``variant`` what this fit varies."""

    name: str
    variant: str
    estimator: Any
    X: Any  # what ``predict``/``transform`` may be called on


def convertible() -> list[tuple[str, type]]:
    """(name, class) of every estimator in ``all_estimators()`` that skl2onnx registers a converter for."""
    from skl2onnx._supported_operators import sklearn_operator_name_map
    from sklearn.utils import all_estimators

    return [(name, cls) for name, cls in all_estimators() if cls in sklearn_operator_name_map]


# --- data --------------------------------------------------------------------------------------------


def _data() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1, 2], 20)
    features = np.abs(rng.normal(size=(60, 4)) + labels[:, None] * 1.5) + 0.1  # positive: the NBs need it
    return {
        "X": features, "y": labels, "y_binary": (labels > 0).astype(int),
        "y_text": np.array(["setosa", "versicolor", "virginica"], dtype=object)[labels],
        "y_reg": features @ [1.0, -2.0, 0.5, 3.0] + rng.normal(scale=0.1, size=60),
        "categories": rng.integers(0, 4, size=(60, 3)),
        "counts": rng.integers(0, 5, size=(60, 6)),
        "text": [f"the {w} model of {v} data" for w, v in zip(["big", "small", "deep"] * 20,
                                                                  ["fair", "open", "hpc", "ai"] * 15, strict=True)],
        "dicts": [{"layer": f"l{i % 3}", "width": float(i % 7)} for i in range(60)],
    }


# --- estimators that need arguments -------------------------------------------------------------------


def _meta(name: str) -> Any | None:
    """An instance of a meta-estimator with small inner estimators; None for the others."""
    from sklearn.compose import ColumnTransformer
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.multioutput import MultiOutputClassifier, MultiOutputRegressor
    from sklearn.pipeline import FeatureUnion, Pipeline
    from sklearn.preprocessing import MinMaxScaler, StandardScaler
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    logistic = LogisticRegression(max_iter=500)
    makers: dict[str, Callable[[], Any]] = {
        "ColumnTransformer": lambda: ColumnTransformer([("scaled", StandardScaler(), [0, 1]),
                                                        ("ranged", MinMaxScaler(), [2, 3])]),
        "FeatureUnion": lambda: FeatureUnion([("pca", PCA(n_components=2)), ("scaled", StandardScaler())]),
        "GridSearchCV": lambda: GridSearchCV(logistic, {"C": [0.1, 1.0]}, cv=3),
        "MultiOutputClassifier": lambda: MultiOutputClassifier(logistic),
        "MultiOutputRegressor": lambda: MultiOutputRegressor(LinearRegression()),
        "OneVsOneClassifier": lambda: _cls("OneVsOneClassifier")(logistic),
        "OneVsRestClassifier": lambda: _cls("OneVsRestClassifier")(logistic),
        "Pipeline": lambda: Pipeline([("scale", StandardScaler()), ("model", logistic)]),
        "RFE": lambda: _cls("RFE")(logistic, n_features_to_select=2),
        "RFECV": lambda: _cls("RFECV")(logistic, cv=3),
        "SelectFromModel": lambda: _cls("SelectFromModel")(DecisionTreeClassifier(random_state=0)),
        "StackingClassifier": lambda: _cls("StackingClassifier")(
            [("tree", DecisionTreeClassifier(random_state=0)), ("logistic", logistic)], cv=3),
        "StackingRegressor": lambda: _cls("StackingRegressor")(
            [("tree", DecisionTreeRegressor(random_state=0)), ("linear", LinearRegression())], cv=3),
        "TunedThresholdClassifierCV": lambda: _cls("TunedThresholdClassifierCV")(logistic, cv=3),
        "VotingClassifier": lambda: _cls("VotingClassifier")(
            [("tree", DecisionTreeClassifier(random_state=0)), ("logistic", logistic)], voting="soft"),
        "VotingRegressor": lambda: _cls("VotingRegressor")(
            [("tree", DecisionTreeRegressor(random_state=0)), ("linear", LinearRegression())]),
    }
    return makers[name]() if name in makers else None


def _cls(name: str) -> type:
    return dict(convertible())[name]


# What a variant changes, per estimator: {label: constructor arguments}.
_LOSSES = {
    "GradientBoostingClassifier": [{"loss": "log_loss"}, {"loss": "exponential", "_binary": True}],
    "GradientBoostingRegressor": [{"loss": loss} for loss in ("squared_error", "absolute_error", "huber", "quantile")],
    "HistGradientBoostingClassifier": [{"_binary": True}, {"categorical_features": [0]}],
    "HistGradientBoostingRegressor": [{"loss": loss} for loss in ("absolute_error", "poisson", "gamma", "quantile")],
    "SGDClassifier": [{"loss": loss} for loss in ("hinge", "log_loss", "modified_huber", "squared_hinge", "perceptron",
                                                  "squared_error", "huber", "epsilon_insensitive",
                                                  "squared_epsilon_insensitive")],
    "SGDRegressor": [{"loss": loss} for loss in ("huber", "epsilon_insensitive", "squared_epsilon_insensitive")],
    "MLPClassifier": [{"solver": solver} for solver in ("sgd", "lbfgs")],
    "MLPRegressor": [{"solver": solver} for solver in ("sgd", "lbfgs")],
    "TweedieRegressor": [{"power": 1.5, "link": "log"}],
    "IsolationForest": [{"max_samples": 30}],
}
# Arguments that make an estimator fit on 60 samples quickly (and predict where the default would not).
_SMALL: dict[str, dict[str, Any]] = {
    "LocalOutlierFactor": {"novelty": True}, "RadiusNeighborsClassifier": {"radius": 5.0},
    "RadiusNeighborsRegressor": {"radius": 5.0}, "GaussianRandomProjection": {"n_components": 2},
    "MLPClassifier": {"max_iter": 300}, "MLPRegressor": {"max_iter": 300}, "LinearSVC": {"max_iter": 300},
    "LinearSVR": {"max_iter": 300}, "LogisticRegression": {"max_iter": 300},
    "GradientBoostingClassifier": {"n_estimators": 10}, "GradientBoostingRegressor": {"n_estimators": 10},
    **{name: {"n_estimators": 5} for name in ("RandomForestClassifier", "RandomForestRegressor", "ExtraTreesClassifier",
                                              "ExtraTreesRegressor", "RandomTreesEmbedding", "IsolationForest",
                                              "BaggingClassifier", "BaggingRegressor", "AdaBoostClassifier",
                                              "AdaBoostRegressor")},
}
_NEIGHBOURS = {"KNeighborsClassifier", "KNeighborsRegressor", "KNeighborsTransformer", "NearestNeighbors",
               "RadiusNeighborsClassifier", "RadiusNeighborsRegressor", "LocalOutlierFactor", "KNNImputer"}


def _gp_kernels() -> list[Any]:
    from sklearn.gaussian_process import kernels as k

    return [k.ConstantKernel() * k.RBF() + k.WhiteKernel(), k.Matern(nu=1.5), k.RationalQuadratic(),
            k.DotProduct() ** 2, k.ExpSineSquared(), k.Exponentiation(k.RBF(), 2),
            k.PairwiseKernel(metric="rbf")]


def _variants(name: str, cls: type) -> list[tuple[str, dict[str, Any]]]:
    """(label, arguments) for each fit of ``cls``; the first is the default."""
    found: list[tuple[str, dict[str, Any]]] = [("default", {})]
    params = inspect.signature(cls.__init__).parameters
    for args in _LOSSES.get(name, []):
        found.append((", ".join(f"{k}={v}" for k, v in args.items() if not k.startswith("_")) or "binary", args))
    if name in _NEIGHBOURS and "algorithm" in params:
        found += [(f"algorithm={a}", {"algorithm": a}) for a in ("kd_tree", "ball_tree", "brute")]
    if name.startswith("GaussianProcess"):
        found += [(f"kernel={kernel}", {"kernel": kernel}) for kernel in _gp_kernels()]
    if "random_state" in params:
        found.append(("random_state=RandomState", {"random_state": "RandomState"}))
    return found


def _instance(name: str, cls: type, args: dict[str, Any]) -> Any:
    from sklearn.base import clone

    made = _meta(name)
    estimator = clone(made) if made is not None else cls()
    own = {k: v for k, v in args.items() if not k.startswith("_")}
    if own.get("random_state") == "RandomState":
        # seeded through a SeedSequence, as an unseeded RandomState() or the global one is: its pickle names
        # more than a legacy RandomState(0)'s
        own["random_state"] = np.random.RandomState(np.random.MT19937(np.random.SeedSequence(0)))
    elif "random_state" in estimator.get_params(deep=False):
        estimator.set_params(random_state=0)
    for key, value in _SMALL.get(name, {}).items():
        own.setdefault(key, value)
    return estimator.set_params(**own)


def _fit(name: str, estimator: Any, args: dict[str, Any], data: dict[str, Any], frame: bool, text_labels: bool):
    """Fit ``estimator`` on the data it takes; returns what it can predict on."""
    from sklearn.base import is_classifier, is_regressor

    X = data["X"]
    if name in ("CategoricalNB", "OneHotEncoder", "OrdinalEncoder", "TargetEncoder"):
        X = data["categories"]
    elif name in ("TfidfTransformer",):
        X = data["counts"]
    elif name == "KernelCenterer":
        X = data["X"] @ data["X"].T
    elif name in ("CountVectorizer", "TfidfVectorizer"):
        estimator.fit(data["text"])
        return data["text"]
    elif name in ("DictVectorizer", "FeatureHasher"):
        estimator.fit(data["dicts"])
        return data["dicts"]
    elif name in ("LabelEncoder", "LabelBinarizer"):
        estimator.fit(data["y_text"] if text_labels else data["y"])
        return data["y_text"] if text_labels else data["y"]
    if frame:
        import pandas as pd

        X = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    if name.startswith("MultiTask") or name == "MultiOutputRegressor":
        y = np.column_stack([data["y_reg"], -data["y_reg"]])
    elif name == "MultiOutputClassifier":
        y = np.column_stack([data["y"], data["y_binary"]])
    elif is_classifier(estimator) or name == "TargetEncoder":
        binary = args.get("_binary") or name == "TunedThresholdClassifierCV"
        y = data["y_binary"] if binary else data["y"]
        if text_labels:
            y = (np.array(["no", "yes"], dtype=object) if binary else data["y_text"][[0, 20, 40]])[y]
    elif is_regressor(estimator) or name in ("PLSRegression",):
        y = data["y_reg"] - data["y_reg"].min() + 1.0  # positive, for the Poisson/Gamma losses
    else:
        y = data["y"]  # supervised selectors use it; the others ignore it
    estimator.fit(X, y)
    return X


def examples(names: set[str] | None = None, *, quick: bool = False) -> Iterator[Example]:
    """Fit every convertible estimator (or those in ``names``) in each of its variants.

    A variant that does not fit is skipped; the default fit of every estimator must succeed. ``quick``
    fits the defaults only."""
    from sklearn.base import is_classifier

    data = _data()
    for name, cls in convertible():
        if names is not None and name not in names:
            continue
        with warnings.catch_warnings():  # deprecations and convergence on tiny data
            warnings.simplefilter("ignore")
            yield from _fits(name, cls, data, quick, is_classifier(_instance(name, cls, {})))


def _fits(name: str, cls: type, data: dict[str, Any], quick: bool, classifier: bool) -> Iterator[Example]:
    variants = _variants(name, cls)[:1] if quick else _variants(name, cls)
    fits = [(label, args, False, False) for label, args in variants]
    if not quick:
        fits.append(("pandas columns", {}, True, False))
        if classifier or name in ("LabelEncoder", "LabelBinarizer", "TargetEncoder"):
            fits.append(("string labels", {}, False, True))
    for label, args, frame, text_labels in fits:
        estimator = _instance(name, cls, args)
        try:
            X = _fit(name, estimator, args, data, frame, text_labels)
        except (ValueError, TypeError):
            if label == "default":
                raise
            continue
        yield Example(name, label, estimator, X)
