"""The ``finetune`` task of a config, behind ``modelAPI.finetune``: on the hub (``device: cpu|gpu``, a job
that publishes a new model version of yours) or on this machine (``device: local``, in the same sandbox the
hub uses, since a hub model may be a pickle). ``out_args.export_file`` receives the fine-tuned model: an
``.onnx`` name gets its verified ONNX conversion, another name the model in its own format.

```yaml
general_args: {task: finetune}
device_args:  {device: cpu}
model_args:   {model_file: [alice/encoder@1], model_name: encoder-tuned}
task_args:    {dataset: alice/my-data@1, target: label, epochs: 5, learning_rate: 1e-3, batch_size: 32,
               freeze: backbone, validation_split: 0.2, seed: 0}
out_args:     {export_file: [encoder-tuned.onnx]}
```"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hpcfair import _registry
from hpcfair.client import HubClient
from hpcfair.config import Config
from hpcfair.errors import ConfigError, HubError
from hpcfair.finetune.errors import FinetuneError
from hpcfair.finetune.spec import Hyper

HYPER_KEYS = ("target", "features", "text", "epochs", "learning_rate", "batch_size", "freeze", "validation_split",
              "seed", "early_stopping", "max_length")


def hyper_args(config: Config) -> dict[str, Any]:
    """The hyper-parameters the config sets (the hub applies its defaults to the rest)."""
    task = config.task
    return {key: getattr(task, key) for key in HYPER_KEYS if getattr(task, key) is not None}


def run(client: HubClient, config: Config) -> dict[str, Any]:
    """Fine-tune the config's one model on its dataset; returns the job's result (hub) or the report (local)."""
    models = config.names("model_file")
    if len(models) != 1:
        raise config.error(config.where("model_file"), "finetune takes one model (a file, PID or owner/name@version)")
    if not config.task.dataset:
        raise config.error("task_args.dataset", "missing: the dataset to train on (owner/name@version, a PID, or "
                                                "a local file or folder with device: local)")
    try:
        hyper = Hyper.from_dict(hyper_args(config))
    except FinetuneError as exc:
        raise ConfigError(exc.detail.split(": ", 1)[1], key=exc.detail.split(":", 1)[0], file=config.file)
    exports = config.names("export_file")
    if len(exports) > 1:
        raise config.error("out_args.export_file", "finetune writes one model; name one file")
    export = config.path(exports[0]) if exports else None
    if config.args.device_args.device == "local":
        return _local(client, config, models[0], hyper, export)
    return _on_hub(client, config, models[0], export)


def _on_hub(client: HubClient, config: Config, model: str, export: Path | None) -> dict[str, Any]:
    if config.path(model).exists():
        raise config.error(config.where("model_file"), "a hub run fine-tunes a hub model: upload it first "
                                                       "(hpcfair upload), or use device_args.device: local")
    info = client.resolve(model)
    task = config.task
    body = {**hyper_args(config), "dataset": task.dataset, "device": config.args.device_args.device}
    for key, value in (("name", (config.names("model_name") or [None])[0]), ("visibility", task.visibility),
                       ("data_file", task.data_file), ("account", config.args.device_args.account)):
        if value:
            body[key] = value
    job = client.request("POST", f"artifacts/{info['artifact']}/versions/{info['version']}/finetune",
                             json=body).json()
    done = client.wait(job)
    result = dict(done["result"])
    if export is not None:
        tuned = client.resolve(result["pid"])
        if export.suffix.lower() == ".onnx":
            conversion = client.wait(result["conversion_job"]) if result.get("conversion_job") else None
            onnx = client.resolve(conversion["result"]["pid"]) if conversion else tuned
            _registry.export(client, _registry.onnx_item(onnx), export)
        else:
            _registry.export(client, tuned["files"][0], export)
        result["export_file"] = str(export)
    return {"where": "hub", "job": done["id"], **result}


def _local(client: HubClient, config: Config, model: str, hyper: Hyper, export: Path | None) -> dict[str, Any]:
    from hpcfair.convert import ConversionError, convert_file, sandbox

    workdir = Path(tempfile.mkdtemp(prefix="hpcfair-finetune-"))
    try:
        model_name = _stage(client, config, model, workdir / "model", config.where("model_file"))
        data = config.task.dataset
        data_file = config.task.data_file
        if config.path(data).is_file():
            data_file = data_file or config.path(data).name
        _stage(client, config, data, workdir / "dataset", "task_args.dataset", folder=True)
        request = {"task": "finetune", "model": f"model/{model_name}", "dataset": "dataset", "output": "out",
                   "hyper": hyper.to_dict(), "data_file": data_file}
        try:
            report = sandbox.run(request, workdir, on_line=_printer())
            tuned = sandbox.output_file(workdir, f"out/{report['files'][0]}")
            if export is not None and export.suffix.lower() == ".onnx":
                convert_file(tuned, export, sample_inputs=workdir / "out" / "sample_inputs.npz",
                             inputs=report["inputs"], on_line=_printer())
            elif export is not None:
                export.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(tuned, export)
        except ConversionError as exc:
            raise HubError(exc.detail, code=exc.code)
        report = {key: value for key, value in report.items() if key != "ok"}
        return {"where": "local", **report, **({"export_file": str(export)} if export else {})}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _stage(client: HubClient, config: Config, value: str, dest: Path, key: str, folder: bool = False) -> str:
    """Copy a local file or folder (or download a hub version's files) into ``dest``; returns the name the
    model has there."""
    local = config.path(value)
    dest.mkdir(parents=True, exist_ok=True)
    if local.is_dir():
        shutil.copytree(local, dest / local.name if not folder else dest, dirs_exist_ok=True)
        return local.name
    if local.is_file():
        shutil.copyfile(local, dest / local.name)
        return local.name
    try:
        info = client.resolve(value)
    except HubError as exc:
        raise config.error(key, f"no file {local}, and not a hub version you can read ({exc.message})")
    client.download(value, dest)
    paths = [f["path"] for f in info["files"]]
    if folder:
        return ""
    configs = sorted((p for p in paths if Path(p).name == "config.json"), key=len)
    if configs:  # a Hugging Face folder
        return str(Path(configs[0]).parent)
    from hpcfair.convert.formats import looks_like_model

    models = [p for p in paths if looks_like_model(p) and not p.lower().endswith(".onnx")] or paths
    return models[0]


def _printer():
    def show(line: str) -> None:
        print(f"finetune: {line}", file=sys.stderr, flush=True)
    return show
