"""Task configs: the papers' four argument groups, validated by one schema (published as JSON Schema).

```yaml
general_args: {task: conversion, backend: [pt, tf]}
device_args:  {worker_num: 4, device: cpu, gpu_mapping_file: '', gpu_mapping_key: ''}
model_args:   {model_name: [encoder, decoder], model_file: [ckpt/encoder.pt, ckpt/decoder.keras], onnx_version: 17}
task_args:    {input: input.npy}
out_args:     {export_file: [encoder.onnx, decoder.onnx]}
```

``model_args`` and ``task_args`` take the same keys (the papers put the model keys in either); a key set
in both must agree. Relative paths are relative to the config file's folder. Every error names the key
and, for a file, its line.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hpcfair.errors import ConfigError

TASKS = ("conversion", "inference", "collaboration", "container", "optimize", "search", "upload", "download",
         "finetune", "generate")
BACKENDS = ("pt", "pytorch", "torch", "tf", "tensorflow", "keras", "sklearn", "scikit-learn", "xgboost", "lightgbm",
            "huggingface", "transformers", "onnx", "mlcube")
Names = str | list[str]
# Whitespace at either end of a file name or beside a dot or slash: a wrapped line ("decoder.\n onnx" in a
# folded YAML scalar reads "decoder. onnx"), never a name anybody meant.
STRAY_SPACE = re.compile(r"^\s|\s$|\s[./\\]|[./\\]\s")
SHIPPED_EXAMPLES = Path(__file__).with_name("examples")
FILE_KEYS = ("model_file", "onnx_file", "input", "sample_inputs", "files", "work_dir", "build_file", "export_file",
             "export_dir")


def _no_stray_space(value: Any) -> Any:
    """Refuse file names with stray whitespace (a str, or each of a list)."""
    for name in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
        if isinstance(name, str) and STRAY_SPACE.search(name):
            fixed = re.sub(r"\s*([./\\])\s*", r"\1", name.strip())
            raise ValueError(f"the file name {name!r} has stray whitespace (a wrapped line?); write it as "
                             f"{fixed!r}")
    return value


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class GeneralArgs(_Group):
    """What to do."""

    task: Literal[TASKS] = Field(description="The task: " + ", ".join(TASKS) + ".")
    backend: Literal[BACKENDS] | list[Literal[BACKENDS]] | None = Field(
        None, description="Framework of each model file (pt, tf, keras, sklearn, xgboost, lightgbm, huggingface, "
                          "onnx), or mlcube for containers; checked against the files.")
    tag: str | None = Field(None, description="A label for the run; 'collaboration' with inference runs a chain.")
    upload: bool = Field(False, description="conversion: convert on the hub (the files are published first).")


class DeviceArgs(_Group):
    """Where to run."""

    worker_num: Annotated[int, Field(ge=0, le=256)] = Field(
        0, description="ONNX Runtime threads for the run (0: the worker's default).")
    device: Literal["cpu", "gpu", "local"] = Field(
        "cpu", description="cpu or gpu: the hub's workers of that kind; local: this machine.")
    gpu_mapping_file: str = Field("", description="Accepted for the papers' configs; GPU placement is the hub's.")
    gpu_mapping_key: str = Field("", description="Accepted for the papers' configs; GPU placement is the hub's.")
    if_no_worker: Literal["refuse", "queue"] = Field(
        "refuse", description="When no worker of the device is up: refuse, or queue the run as a job.")
    mode: Literal["auto", "sync", "async"] = Field(
        "auto", description="auto: answer now or as a job if long; sync: answer now or fail; async: a job.")
    account: Annotated[str, Field(max_length=64)] = Field(
        "", description="The Slurm account (project) a hub job is billed to: yours, or an organization's you write "
                        "in; empty: the model owner's default, else yours.")


class TaskArgs(_Group):
    """What to work on (``model_args`` and ``task_args`` take these keys)."""

    model_name: Names | None = Field(None, description="Name(s) of the model(s); the hub artifact name on upload.")
    model_file: Names | None = Field(
        None, description="Model file(s), or PIDs (ark:/...) or owner/name[@version] of hub models.")
    onnx_file: Names | None = Field(
        None, description="Which ONNX file of a hub version holding several (an ensemble, e.g. booster.onnx) runs; "
                          "one per model in a chain ('' for a model with one). The gateway's 'file' option.")
    onnx_version: Annotated[int, Field(ge=7, le=21)] | None = Field(None, description="Target ONNX opset.")
    input: str | None = Field(None, description="Input file: .npy, .npz, .json, .txt, .csv; or, for a run over "
                                                "a dataset, dataset: owner/name[@version]. generate: a file of "
                                                "prompts, one per line (.txt) or one JSON object per line (.jsonl).")
    dataset: str | None = Field(None, description="A hub dataset (owner/name[@version] or PID) to run over (a job); "
                                                  "finetune: the dataset to train on (a local file or folder too).")
    links: list[dict[str, str]] | None = Field(
        None, description="Per joint of a chain: {input of the next model: output of the one before}.")
    merge: bool = Field(False, description="collaboration: merge the chain into one ONNX model on the hub.")
    outputs: list[str] | None = Field(None, description="Output names to return (default: all).")
    sample_inputs: str | None = Field(None, description="conversion: test data to verify against (default: input).")
    inputs: list[dict[str, Any]] | dict[str, list[dict[str, Any]]] | None = Field(
        None, description="conversion: the model's inputs, [{name, shape, dtype}] with null for dynamic axes (e.g. "
                          "[{name: x, shape: [null, 3, 224, 224], dtype: float32}]); for several models, a mapping "
                          "of model_name to such a list.")
    memory_mb: Annotated[int, Field(ge=256)] | None = Field(
        None, description="conversion: the sandbox's memory limit in MB (default: from the model's size and the "
                          "machine's memory).")
    atol: Annotated[float, Field(ge=0)] | None = Field(None, description="conversion: absolute tolerance.")
    rtol: Annotated[float, Field(ge=0)] | None = Field(None, description="conversion: relative tolerance.")
    quantize: bool = Field(True, description="optimize: also make a dynamic int8 copy.")
    precision: Literal["int8", "int4", "fp16"] | None = Field(
        None, description="optimize: a language model's generation build with int8 or int4 weights, made on the hub "
                          "(fp16 is refused there: its builds run on CPUs).")
    query: str | None = Field(None, description="search: words to look for.")
    filters: dict[str, Names] | None = Field(None, description="search: facet filters, e.g. {framework: onnx}.")
    files: list[str] | None = Field(None, description=(
        "upload: files of the version; a folder gives every file under it, at its path inside the folder."))
    kind: Literal["model", "dataset", "project"] = Field("model", description="upload: what the artifact is.")
    metadata: dict[str, Any] | str | None = Field(
        None, description="upload: metadata, or a file (YAML, JSON, or a model card README.md).")
    visibility: Literal["public", "private"] | None = Field(None, description="upload: who may see it.")
    version: str | None = Field(None, description="upload: the version label (default: the next number).")
    work_dir: str | None = Field(None, description="container: the project folder (with mlcube.yaml), a hub "
                                                   "project (owner/name[@version]), or where a model's cube goes.")
    build_file: str | None = Field(None, description="container: the Containerfile/Dockerfile (default: mlcube.yaml's "
                                                     "docker.build_file).")
    build_tag: str | None = Field(None, description="container: the image name (default: mlcube.yaml's docker.image).")
    volume: str | None = Field(None, description="container: where work_dir is mounted in the container.")
    tasks: Names | None = Field(None, description="container: the project's MLCube tasks to run, in order "
                                                  "(default: all, as mlcube.yaml lists them).")
    target: str | None = Field(None, description="finetune: the column (or NPZ array) to learn.")
    features: list[str] | None = Field(None, description="finetune: the input columns (default: all but target).")
    text: str | None = Field(None, description="finetune: the text column, for Hugging Face text models.")
    data_file: str | None = Field(None, description="finetune: the dataset's file to read when it has several.")
    epochs: Annotated[int, Field(ge=1, le=1000)] | None = Field(None, description="finetune: passes over the "
                                                                                   "training rows (default 5).")
    learning_rate: Annotated[float, Field(gt=0, le=10)] | None = Field(None, description="finetune: step size "
                                                                                        "(default 1e-3).")
    batch_size: Annotated[int, Field(ge=1, le=65536)] | None = Field(None, description="finetune: rows per step (32).")
    freeze: Literal["none", "backbone"] | None = Field(
        None, description="finetune: backbone trains only the last layer (a text model's new head); none trains all.")
    validation_split: Annotated[float, Field(gt=0, lt=1)] | None = Field(
        None, description="finetune: the fraction of rows held out to validate (default 0.2).")
    seed: Annotated[int, Field(ge=0, lt=2**32)] | None = Field(None, description="finetune: seeds the split, the "
                                                                                  "batches and new weights (0); "
                                                                                  "generate: seeds sampling.")
    prompt: str | None = Field(None, description="generate: the text to continue.")
    messages: list[dict[str, str]] | None = Field(
        None, description="generate: a chat, [{role: user, content: ...}], through the model's chat template.")
    max_new_tokens: Annotated[int, Field(ge=1)] | None = Field(None, description="generate: tokens to add (128).")
    temperature: Annotated[float, Field(ge=0, le=2)] | None = Field(None, description="generate: 0 is greedy (1).")
    top_p: Annotated[float, Field(gt=0, le=1)] | None = Field(None, description="generate: nucleus sampling (1).")
    top_k: Annotated[int, Field(ge=0)] | None = Field(None, description="generate: sample from the k likeliest "
                                                                        "tokens (0: all).")
    stop: Names | None = Field(None, description="generate: text that ends generation (up to 4).")
    early_stopping: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        None, description="finetune: stop after this many epochs without a lower validation loss (0: never).")
    max_length: Annotated[int, Field(ge=4, le=512)] | None = Field(None, description="finetune: tokens per text (64).")

    _files = field_validator(*[k for k in FILE_KEYS if k != "export_dir" and k != "export_file"])(_no_stray_space)


class OutArgs(_Group):
    """Where results go."""

    export_file: Names | None = Field(None, description="Output file(s): ONNX files, or outputs as "
                                                        ".npy/.npz/.json/.txt/.csv.")
    export_dir: str | None = Field(None, description="download: the folder to write into.")

    _files = field_validator("export_file", "export_dir")(_no_stray_space)


class TaskConfig(_Group):
    """An HPCFair task config."""

    model_config = ConfigDict(extra="forbid", strict=True, title="HPCFair task config")
    general_args: GeneralArgs
    device_args: DeviceArgs = Field(default_factory=DeviceArgs)
    model_args: TaskArgs = Field(default_factory=TaskArgs)
    task_args: TaskArgs = Field(default_factory=TaskArgs)
    out_args: OutArgs = Field(default_factory=OutArgs)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of task configs (for editors: ``hpcfair schema > hpcfair-config.schema.json``)."""
    schema = TaskConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://hpc-fair.github.io/hpcfair/config.schema.json"
    return schema


SCHEMA_FILE = Path(__file__).with_name("config.schema.json")


# --- loading ----------------------------------------------------------------------------------------


@dataclass
class Config:
    """A validated config: the groups, where each key was written, and the folder paths are relative to."""

    args: TaskConfig
    base: Path
    file: str = ""
    lines: dict[tuple[str, ...], int] = field(default_factory=dict)

    @cached_property
    def task(self) -> TaskArgs:
        """``model_args`` and ``task_args`` together (validated once)."""
        merged = {**self.args.model_args.model_dump(exclude_unset=True),
                  **self.args.task_args.model_dump(exclude_unset=True)}
        return TaskArgs.model_validate(merged)

    def where(self, key: str) -> str:
        """The group holding ``key`` (``task_args`` or ``model_args``) for messages."""
        for group in ("task_args", "model_args"):
            if key in getattr(self.args, group).model_fields_set:
                return f"{group}.{key}"
        return f"model_args.{key}"

    def error(self, key: str, message: str) -> ConfigError:
        """An error about ``key`` (``group.key`` or ``group.key[i]``), with its line when known."""
        path = tuple(part for part in key.replace("]", "").replace("[", ".").split(".") if part)
        line = None
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                line = self.lines[path[:end]]
                break
        if message.startswith("no file") and self.base.resolve() == SHIPPED_EXAMPLES.resolve():
            message += ("; the shipped examples come without model files: `hpcfair examples DIR` copies them with "
                        "the checkpoints and input they name, then run the config there")
        return ConfigError(message, key=key, line=line, file=self.file)

    def names(self, key: str) -> list[str]:
        """A key that takes one or several values, as a list (empty when unset)."""
        value = getattr(self.task, key) if key in TaskArgs.model_fields else getattr(self.args.out_args, key)
        return [] if value is None else [value] if isinstance(value, str) else list(value)

    def conversion_options(self, index: int, name: str) -> dict[str, Any]:
        """``convert_file``'s keyword arguments for the ``index``-th model (called ``name``): its ``inputs``,
        its test data (``sample_inputs``, or the task's ``input`` for the first model, the papers' Listing 1),
        opset, tolerances, memory limit and ``metadata.task`` (which head a Hugging Face folder gets)."""
        task = self.task
        inputs = task.inputs.get(name) if isinstance(task.inputs, dict) else task.inputs  # a model not named: none
        key = "sample_inputs" if task.sample_inputs else "input"
        sample = task.sample_inputs or (task.input if index == 0 and task.input
                                        and not task.input.startswith("dataset:") else None)
        sample_path = self.path(sample) if sample else None
        if sample_path is not None and not sample_path.is_file():
            raise self.error(self.where(key), f"no file {sample_path}")
        options: dict[str, Any] = {"opset": task.onnx_version or 17, "inputs": inputs, "sample_inputs": sample_path,
                                   "atol": task.atol if task.atol is not None else 1e-4,
                                   "rtol": task.rtol if task.rtol is not None else 1e-3}
        if task.memory_mb:
            options["memory_mb"] = task.memory_mb
        if isinstance(task.metadata, dict) and isinstance(task.metadata.get("task"), str):
            options["task"] = task.metadata["task"]  # a Hugging Face folder's head, as on the hub
        return options

    def check_models_named(self, names: list[str]) -> None:
        """Keys of a per-model ``inputs`` mapping must each name a model (``model_name``); checked before any
        work, so that a typo does not surface after the first model has converted."""
        inputs = self.task.inputs
        unknown = [key for key in inputs if key not in names] if isinstance(inputs, dict) else []
        if unknown:
            raise self.error(self.where("inputs"), f"{unknown[0]!r} is not one of the models ({', '.join(names)}, "
                                                   "from model_name); name the models there as in model_name")

    def path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.base / path


def _lines(node: yaml.Node, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    """Each key path's line (1-based) in a composed YAML document."""
    found: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = (*prefix, str(key.value))
            found[path] = key.start_mark.line + 1
            found.update(_lines(value, path))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            path = (*prefix, str(index))
            found[path] = item.start_mark.line + 1
            found.update(_lines(item, path))
    return found


def load(source: str | Path | dict[str, Any] | Config) -> Config:
    """Read and validate a config (a YAML file, or a dict with the same groups)."""
    if isinstance(source, Config):
        return source
    if isinstance(source, dict):
        return validate(source, base=Path.cwd())
    path = Path(source).expanduser()
    if not path.is_file():
        raise ConfigError(f"no config file {path}", key="config")
    text = path.read_text()
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", key="config",
                          line=mark.line + 1 if mark else None, file=str(path))
    return validate(data, base=path.resolve().parent, file=str(path), lines=_lines(node) if node else {})


def validate(data: Any, *, base: Path, file: str = "", lines: dict[tuple[str, ...], int] | None = None) -> Config:
    lines = lines or {}
    if not isinstance(data, dict):
        raise ConfigError("a config is a mapping of general_args, device_args, model_args, task_args, out_args",
                          key="config", file=file)
    try:
        args = TaskConfig.model_validate(data)
    except ValidationError as exc:
        raise _first_error(exc, lines, file)
    config = Config(args=args, base=base, file=file, lines=lines)
    for key in set(args.model_args.model_fields_set) & set(args.task_args.model_fields_set):
        if getattr(args.model_args, key) != getattr(args.task_args, key):
            raise config.error(f"task_args.{key}", f"differs from model_args.{key}; set it in one group")
    return config


def _first_error(exc: ValidationError, lines: dict[tuple[str, ...], int], file: str) -> ConfigError:
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"] if not _is_type_tag(part)]
    key = ".".join(loc)
    line = next((lines[tuple(loc[:end])] for end in range(len(loc), 0, -1) if tuple(loc[:end]) in lines), None)
    kind = error["type"]
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else f"; the keys here are {', '.join(known)}"
        message = "unknown key" + hint
    elif kind == "missing":
        message = "missing; it is required"
    elif kind == "value_error":
        message = str(error["ctx"]["error"])
    elif kind == "literal_error":
        message = f"{error['input']!r} is not allowed; use {error['ctx']['expected']}"
    else:
        message = f"{error['msg'].lower()} (got {json.dumps(error.get('input'), default=str)[:80]})"
    return ConfigError(message, key=key, line=line, file=file)


def _is_type_tag(part: Any) -> bool:
    """Pydantic adds the union member tried (``str``, ``list[str]``, ``literal[...]``) to locations."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or "[" in part)


def _known_keys(loc: list[str]) -> list[str]:
    model: type[BaseModel] = TaskConfig
    for part in loc:
        annotation = model.model_fields[part].annotation if part in model.model_fields else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)
