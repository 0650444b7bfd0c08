"""One fine-tune, start to finish, in whatever process runs it (the sandbox's child, or a local run):
load the model by family, read and split the dataset, measure the base model, train epoch by epoch with
early stopping, keep the best weights, and write the model, its sample inputs and the loss curve."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert import families, formats
from hpcfair.finetune import curve, data
from hpcfair.finetune.errors import FinetuneError, untrainable
from hpcfair.finetune.loop import EarlyStopping, describe, epoch_record, evaluate, metric_name, seed_everything
from hpcfair.finetune.spec import Hyper
from hpcfair.finetune.trainer import Trainer, take

Stage = Callable[[float, str], None]
TRAINABLE = ("torchscript", "torch-export", "keras", "keras-h5", "pickle", "joblib", "skops")


def format_by_name(name: str) -> str | None:
    """The format a file's name says (for checks that open nothing); None when only its content can tell."""
    lower = name.lower()
    if lower.endswith(formats.ARCHIVE_SUFFIXES):
        return "savedmodel"
    return next((f.name for f in families.by_suffix(Path(lower).suffix)), None)


def family_of(model: Path) -> str:
    """``huggingface``, or the conversion library's format key of a trainable file; otherwise the coded
    error that says why not and what to upload instead."""
    from hpcfair.finetune.hf_family import is_hf_folder

    if is_hf_folder(model):
        return "huggingface"
    fmt = formats.detect(model)
    if fmt not in TRAINABLE:
        raise untrainable(model.name, fmt)
    return fmt


def load(model: Path, hyper: Hyper, inputs: list[dict[str, Any]] | None = None) -> Trainer:
    fmt = family_of(model)
    if fmt == "huggingface":
        from hpcfair.finetune.hf_family import HFTrainer

        return HFTrainer(model, hyper)
    if hyper.text:
        raise FinetuneError("invalid_config", "task_args.text is for Hugging Face text models; this model takes "
                                              "numeric features (task_args.features).")
    if fmt in ("torchscript", "torch-export"):
        from hpcfair.finetune import torch_family

        return torch_family.load(model, fmt, hyper, inputs)
    if fmt in ("keras", "keras-h5"):
        from hpcfair.finetune import keras_family

        return keras_family.load(model, fmt, hyper)
    from hpcfair.finetune import sklearn_family

    return sklearn_family.load(model, fmt, hyper)


def hardware() -> dict[str, Any]:
    """What trained it, in the terms of the hub's benchmarks (kind, cpu_model, cores, memory_gb)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    out: dict[str, Any] = {"kind": "cpu", "cpu_model": cpu, "cores": os.cpu_count() or 1}
    try:
        out["memory_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    return out


def finetune(model: Path, dataset: Path, out: Path, hyper: Hyper, *, data_file: str | None = None,
             inputs: list[dict[str, Any]] | None = None, stage: Stage = lambda fraction, what: None,
             bounds: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fine-tune ``model`` on the dataset files under ``dataset``; write the result into ``out``.

    ``stage(fraction, line)`` hears the progress: one line per epoch with its metrics. ``bounds``: what an
    HDF5/NetCDF file or Zarr store may hold (``hpcfair.scidata.Bounds``'s fields)."""
    started = time.monotonic()
    seed_everything(hyper.seed)
    paths = sorted(str(p.relative_to(dataset)) for p in dataset.rglob("*") if p.is_file())
    chosen = data.choose(paths, data_file)
    def opener(path: str) -> Any:
        return open(dataset / path, "rb")

    if data.is_scientific(chosen):
        source, columns = data.scientific_schema(chosen, data.read_structure(dataset / chosen, bounds))
    else:
        source, columns = data.schema(chosen, opener, paths)
    data.check(columns, hyper.target, hyper.features, hyper.text)
    names = data.variables_for(source, hyper.target, hyper.features) if source.variables else None
    stage(0.02, f"loading the model ({model.name})")
    trainer = load(model, hyper, inputs)
    table = data.load_variables(dataset / chosen, names) if names else data.load(source, opener)
    y = table[hyper.target]
    features = hyper.features or (names[1:] if names else None)
    x = table[hyper.text] if hyper.text else data.features(table, hyper.target, features)[0]
    train_rows, val_rows = data.split(len(y), hyper.validation_split, hyper.seed)
    stage(0.05, f"{trainer.family} model; {len(train_rows)} training and {len(val_rows)} validation rows from "
                f"{source.path}")
    inputs_all, encoded = trainer.prepare(x, y)
    x_train, y_train = take(inputs_all, train_rows), encoded[train_rows]
    x_val, y_val = take(inputs_all, val_rows), encoded[val_rows]
    labels = trainer.labels
    base = evaluate(labels, trainer.predict(x_val), y_val)
    stage(0.08, f"base model on the validation rows: loss {base['loss']:.4g}, {metric_name(labels)} "
                f"{base[metric_name(labels)]:.4g}")
    epochs = hyper.epochs if trainer.epochs_apply else 1
    stopper, history, best = EarlyStopping(hyper.early_stopping), [], None
    for epoch in range(1, epochs + 1):
        began = time.perf_counter()
        trainer.fit_epoch(x_train, y_train, epoch)
        seconds = time.perf_counter() - began
        record = epoch_record(epoch, evaluate(labels, trainer.predict(x_train), y_train),
                              evaluate(labels, trainer.predict(x_val), y_val), seconds)
        history.append(record)
        if stopper.improved(epoch, record["val_loss"]) and hyper.early_stopping:
            best = trainer.snapshot()
        stage(0.08 + 0.84 * epoch / epochs, describe(record, epochs))
        if stopper.stopped:
            stage(0.92, f"stopping early: no lower validation loss for {hyper.early_stopping} epochs; keeping "
                        f"epoch {stopper.best_epoch}")
            break
    if best is not None and stopper.best_epoch != history[-1]["epoch"]:
        trainer.restore(best)
    kept = history[stopper.best_epoch - 1] if hyper.early_stopping and stopper.best_epoch else history[-1]
    stage(0.94, "writing the fine-tuned model")
    out.mkdir(parents=True, exist_ok=True)
    files = trainer.save(out)
    specs, sample = trainer.signature(x_val)
    np.savez(out / "sample_inputs.npz", **sample)
    curve.write(history, out / "loss_curve.png")
    name = metric_name(labels)
    final = {key[4:]: value for key, value in kept.items() if key.startswith("val_")}
    return {
        "family": trainer.family,
        "format": family_of(model),
        "task": labels.task,
        "classes": [c if isinstance(c, int | float | str) else str(c) for c in labels.classes],
        "strategy": trainer.strategy,
        "files": files,
        "inputs": specs,
        "history": history,
        "base": {key: round(value, 6) for key, value in base.items()},
        "final": final,
        "metric": name,
        "epoch_kept": kept["epoch"],
        "stopped_early": stopper.stopped,
        "rows": {"train": int(len(train_rows)), "validation": int(len(val_rows))},
        "data_file": chosen,
        "hyperparameters": {**hyper.hyperparameters(), **getattr(trainer, "hyper_extra", dict)()},
        "parameters": trainer.parameters(),
        "libraries": trainer.libraries(),
        "hardware": hardware(),
        "curve": curve.caption(history),
        "seconds": round(time.monotonic() - started, 2),
    }
