""""Use it" snippets for a landing page: the client's YAML config, its three lines of Python, the CLI line.

The YAML follows the papers' listings (``general_args``, ``device_args``, ``task_args``, ``out_args``) and
is valid for ``hpcfair.config`` as written (a test loads each kind's config with it).
"""

from __future__ import annotations

from dataclasses import dataclass

from hub.registry.models import Artifact, Version


@dataclass
class Snippets:
    config_name: str
    yaml: str
    python: str
    cli: str


def for_version(artifact: Artifact, version: Version) -> Snippets:
    ref = f"{artifact.full_name}@{version.label}"
    if artifact.kind == "model":
        name = "inference.yaml"
        yaml = (f'general_args:\n  task: "inference"\n  backend: "onnx"\n'
                f'device_args:\n  device: "cpu"\n  worker_num: 1\n'
                f'task_args:\n  model_file: ["{ref}"]\n  input: "input.npy"\n'
                f'out_args:\n  export_file: "output.npy"\n')
        python = f'from hpcfair import modelAPI\napi = modelAPI()\noutputs = api.inference("{name}")'
        cli = f"hpcfair infer {ref} input.npy --output output.npy"
    elif artifact.kind == "project":
        name = "container.yaml"
        yaml = (f'general_args:\n  task: "container"\n  backend: "mlcube"\n'
                f'device_args:\n  device: "cpu"\n'
                f'model_args:\n  work_dir: "{ref}"\n'
                f'out_args:\n  export_file: "out.txt"\n')
        python = f'from hpcfair import modelAPI\napi = modelAPI()\napi.container("{name}")'
        cli = f"hpcfair run {name}"
    else:
        name = "download.yaml"
        yaml = (f'general_args:\n  task: "download"\n'
                f'task_args:\n  model_file: ["{ref}"]\n'
                f'out_args:\n  export_dir: "data"\n')
        python = f'from hpcfair import modelAPI\napi = modelAPI()\ndataset = api.load_dataset("{ref}")'
        cli = f"hpcfair download {ref} --dest data"
    return Snippets(name, yaml, python, cli)
