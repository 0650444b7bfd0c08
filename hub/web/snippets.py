""""Use it" snippets for a landing page: the client's YAML config, its Python, the CLI line, and for a model
the input file they read and ``api.load_model`` in ONNX Runtime.

Each runs as shown (a test runs them against a live hub): the YAML follows the papers' listings
(``general_args``, ``device_args``, ``task_args``, ``out_args``) and is valid for ``hpcfair.config``; a
model's outputs go to ``outputs.npz``, which holds any number of them (``.npy`` holds one, and the client
refuses it for a model with several outputs).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from hub.registry.models import Artifact, Version

# Where a model's snippets write its outputs: an .npz holds every output by name.
OUTPUTS_FILE = "outputs.npz"
# NumPy's names for the signature dtypes the page may meet; others get no example.
NUMERIC = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "bool"}
MAX_EXAMPLE_VALUES = 64


@dataclass
class Snippets:
    config_name: str
    yaml: str
    python: str
    cli: str
    input_name: str = ""  # the input file the YAML and the CLI line read (models)
    input_text: str = ""  # its contents, when the page can give an example ("" when not)
    load_python: str = ""  # api.load_model(...) and one run in ONNX Runtime (models)
    note: str = ""  # for a version holding several ONNX models: which one the snippets run, and how to pick
    openai: str = ""  # a language model: the OpenAI-compatible endpoint through the openai client
    transformers: str = ""  # a language model in Hugging Face's layout: transformers through the hub's HF route
    generation: bool = False  # the snippets generate text (a language model) rather than run tensors


def example_inputs(signature: list[dict[str, Any]]) -> dict[str, Any]:
    """Inputs the model accepts, keyed by input name: zeros, dynamic axes as 1; {} when a tensor is large or
    not numeric (then people bring their own)."""
    example: dict[str, Any] = {}
    for item in signature:
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in (item.get("shape") or [])]
        size = 1
        for d in shape:
            size *= d
        if size > MAX_EXAMPLE_VALUES or str(item.get("dtype", "float32")) not in NUMERIC:
            return {}
        zero: Any = 0 if "int" in str(item.get("dtype", "")) else False if item.get("dtype") == "bool" else 0.0
        value: Any = zero
        for d in reversed(shape):
            value = [value] * d
        example[str(item.get("name", "input"))] = value
    return example


def _load_model(ref: str, signature: list[dict[str, Any]], file: str = "") -> str:
    """``api.load_model`` and one run on zeros of the signature's shapes (the verified ONNX conversion)."""
    chosen = f', file="{file}"' if file else ""
    lines = ["import numpy as np", "from hpcfair import modelAPI", "api = modelAPI()",
             f'session = api.load_model("{ref}"{chosen})  # its ONNX version, in ONNX Runtime on this machine']
    feeds = []
    for item in signature:
        shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in (item.get("shape") or []))
        dtype = str(item.get("dtype") or "float32")
        if dtype not in NUMERIC:
            return ""
        feeds.append(f'"{item.get("name", "input")}": np.zeros({shape!r}, dtype="{dtype}")')
    if not feeds:
        lines.append("print([i.name for i in session.get_inputs()])  # then session.run(None, {name: array})")
        return "\n".join(lines)
    lines.append("names = [o.name for o in session.get_outputs()]")
    lines.append(f"outputs = dict(zip(names, session.run(None, {{{', '.join(feeds)}}})))")
    lines.append("print(outputs)")
    return "\n".join(lines)


def for_generation(artifact: Artifact, version: Version, public_url: str, hugging_face: bool) -> Snippets:
    """A language model's snippets: ``hpcfair generate``, ``task: generate`` YAML and ``api.generate``, the
    ``openai`` client on ``/v1``, and ``transformers`` through the hub's Hugging Face route when the version
    is in Hugging Face's layout (``hugging_face``)."""
    ref = f"{artifact.full_name}@{version.label}"
    name = "generate.yaml"
    yaml = (f'general_args:\n  task: "generate"\n'
            f'model_args:\n  model_file: "{ref}"\n'
            f'task_args:\n  prompt: "The hub converts"\n  max_new_tokens: 64\n  temperature: 0\n'
            f'out_args:\n  export_file: "answer.txt"\n')
    python = (f'from hpcfair import modelAPI\napi = modelAPI()\n'
              f'answer = api.generate("{name}", lambda text: print(text, end=""))  # streamed; also in answer.txt\n'
              f'print(answer["finish_reason"], answer["completion_tokens"])')
    cli = f'hpcfair generate {ref} "The hub converts" --max-new-tokens 64 --temperature 0'
    openai = (f'from openai import OpenAI\n'
              f'client = OpenAI(base_url="{public_url}/v1", api_key=TOKEN)  # a hub token (hpcfair login)\n'
              f'answer = client.completions.create(model="{ref}", prompt="The hub converts", max_tokens=64,\n'
              f'                                   temperature=0)\n'
              f'print(answer.choices[0].text)')
    transformers = (f'import os\nos.environ["HF_ENDPOINT"] = "{public_url}"  # the hub speaks the Hugging Face '
                    f'Hub protocol\n'
                    f'from transformers import AutoModelForCausalLM, AutoTokenizer\n'
                    f'repo, revision = "{artifact.full_name}", "{version.label}"\n'
                    f'tokenizer = AutoTokenizer.from_pretrained(repo, revision=revision)\n'
                    f'model = AutoModelForCausalLM.from_pretrained(repo, revision=revision)\n'
                    f'ids = tokenizer("The hub converts", return_tensors="pt").input_ids\n'
                    f'print(tokenizer.decode(model.generate(ids, max_new_tokens=64, do_sample=False)[0]))'
                    if hugging_face else "")
    return Snippets(name, yaml, python, cli, openai=openai, transformers=transformers, generation=True)


def for_version(artifact: Artifact, version: Version, signature: list[dict[str, Any]] | None = None,
                onnx_files: list[str] | None = None) -> Snippets:
    """The snippets of ``version``; for a model, ``signature`` is the inputs of what runs (its ONNX version)
    and ``onnx_files`` the ONNX files it holds: of several (an ensemble), the snippets name the first, whose
    inputs ``signature`` must be."""
    ref = f"{artifact.full_name}@{version.label}"
    if artifact.kind == "model":
        name = "inference.yaml"
        example = example_inputs(signature or [])
        input_name = "input.json" if example else "input.npy"
        file = onnx_files[0] if onnx_files and len(onnx_files) > 1 else ""
        yaml = (f'general_args:\n  task: "inference"\n  backend: "onnx"\n'
                f'device_args:\n  device: "cpu"\n  worker_num: 1\n'
                f'task_args:\n  model_file: ["{ref}"]\n' + (f'  onnx_file: ["{file}"]\n' if file else "")
                + f'  input: "{input_name}"\n'
                f'out_args:\n  export_file: "{OUTPUTS_FILE}"\n')
        python = (f'from hpcfair import modelAPI\napi = modelAPI()\n'
                  f'outputs = api.inference("{name}")  # {{output name: array}}, also saved in {OUTPUTS_FILE}\n'
                  f'print(outputs)')
        cli = f"hpcfair infer {ref} {input_name} --output {OUTPUTS_FILE}"
        cli += f" --file {shlex.quote(file)}" if file else ""
        note = (f"This version holds {len(onnx_files or [])} ONNX models ({', '.join(onnx_files or [])}); the "
                f"snippets run {file}: name another in onnx_file, --file or file= to run it." if file else "")
        return Snippets(name, yaml, python, cli, input_name, json.dumps(example) if example else "",
                        _load_model(ref, signature or [], file), note)
    if artifact.kind == "project":
        name = "container.yaml"
        yaml = (f'general_args:\n  task: "container"\n  backend: "mlcube"\n'
                f'device_args:\n  device: "cpu"\n'
                f'model_args:\n  work_dir: "{ref}"\n'
                f'out_args:\n  export_file: "out.txt"\n')
        python = f'from hpcfair import modelAPI\napi = modelAPI()\napi.container("{name}")'
        cli = f"hpcfair run {name}"
        return Snippets(name, yaml, python, cli)
    name = "download.yaml"
    yaml = (f'general_args:\n  task: "download"\n'
            f'task_args:\n  model_file: ["{ref}"]\n'
            f'out_args:\n  export_dir: "data"\n')
    python = f'from hpcfair import modelAPI\napi = modelAPI()\ndataset = api.load_dataset("{ref}")'
    cli = f"hpcfair download {ref} --dest data"
    return Snippets(name, yaml, python, cli)
