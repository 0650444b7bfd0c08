"""``modelAPI``'s inference and collaboration: one model or a chain run on this machine (``device: local``),
on the hub's gateway (answered at once, or as a job that is waited for), as a batch job over a hub dataset,
or merged into one ONNX model on the hub. Chains follow ``hpcfair.chain``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hpcfair import _registry, _sources, chain, scidata
from hpcfair import arrays as tensors
from hpcfair._sources import NAME_RE, ModelSource
from hpcfair.batches import BUDGET_BYTES
from hpcfair.client import HubClient
from hpcfair.compute import CodedError
from hpcfair.compute.runs import batch_rows, run_rows
from hpcfair.config import Config
from hpcfair.errors import HubError

ORT_DTYPES = {"tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
              "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
              "tensor(bool)": "bool"}


def run_models(client: HubClient, config: Config) -> dict[str, Any]:
    """``modelAPI.inference`` and ``collaborate``: run the model(s) here, on the gateway or as a batch job over
    a dataset, or merge them; the outputs are written to ``export_file`` and returned."""
    task, device = config.task, config.args.device_args
    sources = _sources.sources(config)
    exports = config.names("export_file")
    if len(exports) > 1:
        raise config.error("out_args.export_file", "name one file for the outputs")
    export = config.path(exports[0]) if exports else None
    files = _sources.onnx_files(config, sources)
    if len(sources) > 1 and (task.merge or device.device != "local") and any(files):
        raise config.error(config.where("onnx_file"), "a chain on the hub (or merged there) runs each version's "
                                                      "only ONNX file; run it with device: local to pick files of "
                                                      "an ensemble")
    if task.merge:
        return merge(client, config, sources, export)
    dataset = task.dataset or (task.input[len("dataset:"):].strip() if (task.input or "").startswith("dataset:")
                               else None)
    common = {"device": device.device, "threads": device.worker_num or None, "if_no_worker": device.if_no_worker,
              "file": files[0] if len(sources) == 1 else None, "account": device.account or None}
    if dataset:  # a batch run over a hub dataset: always a job
        runnable = _registry.runnable(client, config, sources)
        outputs = on_hub(client, runnable, None, task.links, dataset=dataset, **common)
    else:
        raw, cast = _sources.read_input(config, opened=device.device == "local")
        if device.device == "local":
            outputs = run_here(client, config, sources, raw, cast)
        else:
            runnable = _registry.runnable(client, config, sources)
            feeds = tensors.fit(raw, _registry.onnx_inputs(runnable[0], files[0]), cast=cast)
            outputs = on_hub(client, runnable, feeds, task.links, mode=device.mode, outputs=task.outputs, **common)
    if export is not None:
        tensors.write_outputs(export, outputs)
    return outputs


def collaborate(client: HubClient, config: Config) -> dict[str, Any]:
    """``modelAPI.collaborate``: ``run_models`` for a chain of two or more models."""
    if len(_sources.sources(config)) < 2:
        raise config.error(config.where("model_file"), "a collaboration chains two or more models")
    return run_models(client, config)


def on_hub(client: HubClient, runnable: list[dict[str, Any]], feeds: dict[str, Any] | None,
           links: list[dict[str, str]] | None, **options: Any) -> dict[str, Any]:
    """Run one version, or a chain of them, on the gateway; a run answered with a job is waited for."""
    refs = [_sources.version_ref(info) for info in runnable]
    if len(refs) == 1:
        outputs, job = client.infer(refs[0], feeds or {}, **options)
    else:
        outputs, job = client.collaborate(refs, feeds, links=links, **options)
    return outputs or job_outputs(client, client.wait(job))


def merge(client: HubClient, config: Config, sources: list[ModelSource], export: Path | None) -> dict[str, Any]:
    """The chain merged into one ONNX model by a hub job (``task_args.merge``)."""
    task = config.task
    refs = [_sources.version_ref(info) for info in _registry.runnable(client, config, sources)]
    name = NAME_RE.sub("-", "-".join(s.name for s in sources))[:90] + "-merged"
    _, job = client.collaborate(refs, None, merge=True, links=task.links, name=name,
                                visibility=task.visibility or "private")
    done = client.wait(job)
    merged = client.resolve(done["result"]["pid"])
    if export is not None:
        _registry.export(client, _registry.onnx_item(merged), export)
    return {"pid": merged["pid"], "version": f"{merged['artifact']}@{merged['version']}",
            "verified": (merged.get("metadata") or {}).get("verified"),
            "export_file": str(export) if export else None}


def job_outputs(client: HubClient, job: dict[str, Any]) -> dict[str, Any]:
    """The outputs an inference job published (its ``outputs.npz``)."""
    result = job.get("result") or {}
    published = client.resolve(result["pid"])
    item = next(f for f in published["files"] if f["path"] == "outputs.npz")
    return tensors.read_outputs(_registry.named_copy(client, item))


def run_here(client: HubClient, config: Config, sources: list[ModelSource], raw: Any, cast: bool) -> dict[str, Any]:
    """``device: local``: the model(s) run with ONNX Runtime on this machine."""
    threads = config.args.device_args.worker_num
    files = _sources.onnx_files(config, sources)
    sessions = [_registry.load_model(client, str(s.local) if s.local else s.ref, file=file, threads=threads,
                                     _key=s.key) for s, file in zip(sources, files, strict=True)]
    spec = [{"name": i.name, "dtype": ORT_DTYPES.get(i.type), "shape": i.shape} for i in sessions[0].get_inputs()]
    if isinstance(raw, scidata.VariableReader):
        with raw:
            return run_variable(sessions, raw, spec, config.task.links)
    return run_chain(sessions, tensors.fit(raw, spec, cast=cast), config.task.links)


def run_variable(sessions: list[Any], reader: scidata.VariableReader, spec: list[dict[str, Any]],
                 links: list[dict[str, str]] | None) -> dict[str, Any]:
    """The chain over a variable's rows, a slab of whole chunks (``BUDGET_BYTES`` of inputs; a model with a
    fixed first axis: that many rows) read and run at a time, so memory holds one slab and the outputs."""
    if not reader.shape:
        return run_chain(sessions, tensors.fit(reader.read(0, 0), spec, cast=False), links)
    size = batch_rows([item["shape"] for item in spec], {}, reader.slab_rows(BUDGET_BYTES))
    buffer = None

    def run(start: int, stop: int) -> dict[str, Any]:
        nonlocal buffer
        rows = stop - start
        if buffer is None or len(buffer) < rows:
            buffer = np.empty((rows, *reader.shape[1:]), reader.dtype)
        return run_chain(sessions, tensors.fit(reader.read(start, stop, buffer[:rows]), spec, cast=False), links)

    try:
        return run_rows(run, 0, reader.shape[0], size)
    except CodedError as exc:
        raise HubError(exc.detail, code=exc.code)


def run_chain(sessions: list[Any], feeds: dict[str, Any], links: list[dict[str, str]] | None = None
              ) -> dict[str, Any]:
    """Run ONNX Runtime sessions one after another: each joint maps by ``links[i]`` ({next input: output})
    or by position (``hpcfair.chain``)."""
    current = feeds
    for index, session in enumerate(sessions):
        names = [output.name for output in session.get_outputs()]
        values = dict(zip(names, session.run(None, current), strict=True))
        if index + 1 == len(sessions):
            return values
        try:
            current = chain.feed(chain.link_at(links, index), values,
                                 [item.name for item in sessions[index + 1].get_inputs()],
                                 before=f"model {index + 1}", after=f"model {index + 2}",
                                 where=f"task_args.links[{index}]")
        except chain.ChainError as exc:
            raise HubError(str(exc), code="invalid_inputs")
    return current
