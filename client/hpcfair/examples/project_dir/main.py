"""The project's tasks, run the MLCube way: main.py TASK --param=path ...

prepare  writes data/train.npz and data/test.npz: y = x @ w + noise, with w and the sizes from parameters.yaml
train    fits a ridge regression on train.npz, writes model/weights.npz and metrics.json (test RMSE, R^2)
"""

import argparse
import json
import os
import sys

import numpy as np
import yaml


def prepare(args, params):
    rng = np.random.default_rng(int(params["seed"]))
    n, d = int(params["samples"]), int(params["features"])
    w = rng.normal(size=d)
    x = rng.normal(size=(n, d))
    y = x @ w + float(params["noise"]) * rng.normal(size=n)
    split = int(0.8 * n)
    os.makedirs(args.data_dir, exist_ok=True)
    np.savez(os.path.join(args.data_dir, "train.npz"), x=x[:split], y=y[:split])
    np.savez(os.path.join(args.data_dir, "test.npz"), x=x[split:], y=y[split:])
    print(f"prepare: {split} training and {n - split} test samples with {d} features")


def train(args, params):
    with np.load(os.path.join(args.data_dir, "train.npz")) as data:
        x, y = data["x"], data["y"]
    with np.load(os.path.join(args.data_dir, "test.npz")) as data:
        x_test, y_test = data["x"], data["y"]
    l2 = float(params["l2"])
    w = np.linalg.solve(x.T @ x + l2 * np.eye(x.shape[1]), x.T @ y)
    residual = y_test - x_test @ w
    rmse = float(np.sqrt(np.mean(residual ** 2)))
    r2 = float(1 - np.sum(residual ** 2) / np.sum((y_test - y_test.mean()) ** 2))
    os.makedirs(args.model_dir, exist_ok=True)
    np.savez(os.path.join(args.model_dir, "weights.npz"), w=w)
    with open(args.metrics, "w") as fh:
        json.dump({"test_rmse": rmse, "test_r2": r2, "l2": l2}, fh)
    print(f"train: test RMSE {rmse:.4f}, R^2 {r2:.4f}")


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("task", choices=["prepare", "train"])
    parser.add_argument("--parameters", required=True)
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--model_dir")
    parser.add_argument("--metrics")
    args = parser.parse_args(argv)
    with open(args.parameters) as fh:
        params = yaml.safe_load(fh)
    {"prepare": prepare, "train": train}[args.task](args, params)
    return 0


if __name__ == "__main__":
    sys.exit(main())
