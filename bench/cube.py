"""MLCube figures: build time (cold and with podman's layer cache), image size, and `podman run`
start-to-output time of a model cube's infer task, against baselines measured in the same run: the base
image's own size and a bare `python3 -c pass` in the base image.

    python bench/cube.py [--runs 5]

Needs podman and the base image (scripts/cube-base.sh); wheels come from ~/.cache/hpcfair-hub/wheels.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client"))
os.environ.setdefault("CONTAINERS_CONF", str(ROOT / "deploy" / "podman" / "containers.conf"))

from hpcfair.cube import CubeInfo, build, generate, parse_dir, prepare_context  # noqa: E402
from hpcfair.cube.engine import inspect, run_task  # noqa: E402

BASE = os.environ.get("HUB_CUBE_BASE_IMAGE", "localhost/hpcfair-base:bookworm")
WHEELS = Path(os.environ.get("HUB_CUBE_WHEELS", Path.home() / ".cache" / "hpcfair-hub" / "wheels"))


def mlp(path: Path) -> None:
    """A 784-256-10 MLP in ONNX, random weights."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) * 0.05 for s in ((784, 256), (256, 10)))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    image = "localhost/hpcfair/bench-mlp:1"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        mlp(tmp / "mlp.onnx")
        np.savez(tmp / "x.npz", x=np.random.default_rng(1).standard_normal((8, 784)).astype(np.float32))
        cube = generate(tmp / "cube", tmp / "mlp.onnx", CubeInfo(name="bench-mlp", title="MLP", image=image),
                        tmp / "x.npz")
        spec = parse_dir(cube)
        context = prepare_context(cube, tmp / "context", WHEELS)
        subprocess.run(["podman", "rmi", "-f", image], capture_output=True)
        cold = build("podman", context, context / "Containerfile", image, network="none", no_cache=True)
        warm = build("podman", context, context / "Containerfile", image, network="none")
        _, base_size = inspect("podman", BASE)
        bare = [timed(["podman", "run", "--rm", "--network=none", BASE, "python3", "-c", "pass"])
                for _ in range(args.runs)]
        runs = [run_task("podman", image, spec, "infer", cube / "workspace").seconds for _ in range(args.runs)]
    print(f"machine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{subprocess.run(['podman', '--version'], capture_output=True, text=True).stdout.strip()}")
    print(f"build, cold (--no-cache, every layer built): {cold.seconds:.1f} s")
    print(f"build, warm (podman layer cache):      {warm.seconds:.1f} s ({warm.seconds / cold.seconds:.2f}x cold)")
    print(f"image size: {cold.size / 1e6:.0f} MB; base image {base_size / 1e6:.0f} MB "
          f"({cold.size / base_size:.2f}x base: the venv with ONNX Runtime, NumPy, PyYAML adds "
          f"{(cold.size - base_size) / 1e6:.0f} MB)")
    print(f"podman run, base image python3 -c pass (baseline): median {statistics.median(bare):.2f} s")
    print(f"podman run, cube infer start to output:           median {statistics.median(runs):.2f} s "
          f"({statistics.median(runs) / statistics.median(bare):.2f}x baseline; runs {args.runs})")
    subprocess.run(["podman", "rmi", "-f", image], capture_output=True)


if __name__ == "__main__":
    main()
