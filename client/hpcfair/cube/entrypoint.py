"""The entrypoint of a model's MLCube: run the ONNX model with ONNX Runtime.

    entrypoint.py infer --model=model.onnx --inputs=sample_inputs.npz --parameters=parameters.yaml
                        --outputs=outputs.npz

Runs inside the container with only the standard library, NumPy, ONNX Runtime and PyYAML. Inputs are
an ``.npz`` (arrays named as the model's inputs) or an ``.npy`` (a model with one input); outputs are
written as ``.npz`` named as the model's outputs. ``parameters.yaml`` holds the execution providers,
whether a GPU is required and the thread count. A summary line of JSON goes to stdout.
"""

import argparse
import json
import sys

import numpy as np
import onnxruntime as ort
import yaml


def fail(message, code=2):
    print(json.dumps({"ok": False, "error": message}))
    return code


def load_inputs(path, session):
    names = [item.name for item in session.get_inputs()]
    if path.endswith(".npy"):
        if len(names) != 1:
            raise ValueError(f"the model has {len(names)} inputs ({', '.join(names)}); give an .npz naming each")
        return {names[0]: np.load(path, allow_pickle=False)}
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    if len(arrays) == 1 and len(names) == 1 and names[0] not in arrays:
        arrays = {names[0]: next(iter(arrays.values()))}
    missing = [name for name in names if name not in arrays]
    if missing:
        raise ValueError(f"inputs {', '.join(missing)} are missing from {path} (it has {', '.join(arrays)})")
    return {name: arrays[name] for name in names}


def infer(args):
    with open(args.parameters) as fh:
        params = yaml.safe_load(fh) or {}
    available = ort.get_available_providers()
    wanted = params.get("providers") or ["CPUExecutionProvider"]
    if params.get("require_gpu") and "CUDAExecutionProvider" not in available:
        return fail("this is the GPU cube, but ONNX Runtime offers no CUDA here (run it with --gpus all / "
                    "--device nvidia.com/gpu=all / singularity --nv, or use the CPU cube)", 3)
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(params.get("intra_op_threads") or 0)
    session = ort.InferenceSession(args.model, options, providers=[p for p in wanted if p in available])
    try:
        feeds = load_inputs(args.inputs, session)
    except (ValueError, OSError) as exc:
        return fail(str(exc))
    names = [item.name for item in session.get_outputs()]
    outputs = session.run(None, feeds)
    named = dict(zip(names, outputs, strict=True))
    np.savez(args.outputs, **named)
    print(json.dumps({"ok": True, "providers": session.get_providers(),
                      "outputs": {name: list(value.shape) for name, value in named.items()}}))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description="Run this MLCube's model with ONNX Runtime.")
    parser.add_argument("task", choices=["infer"])
    parser.add_argument("--model", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--parameters", required=True)
    parser.add_argument("--outputs", required=True)
    args = parser.parse_args(argv)
    return infer(args)


if __name__ == "__main__":
    sys.exit(main())
