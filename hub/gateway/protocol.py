"""What an ``/infer`` or ``/collaborate`` request and its answer are, without a web framework: the options
and their types, the body (JSON, ``.npy``, ``.npz``), the model a request names (``ModelRef``), the chain's
description for a worker (``steps_of``), the output format asked for, and the answer's body and headers.

Both entry points read requests through ``parse_body`` and write answers through ``encode_answer``: the DRF
views (``hub.gateway.api.views``) and the express path (``hub.gateway.wsgi``), so an option of the wrong
type (``mode: {}``, ``threads: 2.7``, ``output_format: [null, null]``) is the same coded 400 on both, never a
500 and never silently taken as the default. Nothing here touches the database, a request object or a
lane, so it is tested in milliseconds (tests/gateway/test_protocol.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings

from hub.bounded import load_json
from hub.errors import HubError
from hub.gateway import tensors
from hub.registry.rule import NAMES

# --- options -------------------------------------------------------------------------------------------

OPTION_NAMES = ("device", "threads", "worker_num", "mode", "if_no_worker", "outputs", "output_format", "file",
                "dataset", "dataset_file", "batch_size", "account")
COLLABORATE_FIELDS = (*OPTION_NAMES, "models", "links", "merge", "name", "title", "license", "task", "visibility")
DEVICES = ("cpu", "gpu")
MODES = ("auto", "sync", "async")
IF_NO_WORKER = ("refuse", "queue")
VISIBILITIES = tuple(NAMES)

# name -> the allowed words (a tuple), or the type: "text", "whole", "names", "flag", "list", "links"
SPEC: dict[str, tuple[str, ...] | str] = {
    "device": DEVICES, "mode": MODES, "if_no_worker": IF_NO_WORKER, "output_format": tuple(tensors.FORMATS),
    "threads": "whole", "worker_num": "whole", "batch_size": "whole",
    "outputs": "names", "file": "text", "dataset": "text", "dataset_file": "text", "account": "text",
    # /collaborate
    "models": "list", "links": "list", "merge": "flag", "name": "text", "title": "text", "license": "text",
    "task": "text", "visibility": VISIBILITIES,
}
RANGES: dict[str, tuple[int, int]] = {"batch_size": (1, 1_000_000)}
_FLAGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def max_threads() -> int:
    return settings.HUB_INFER_MAX_THREADS


def check(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with each value of its option's type (query text converted); a 400 naming the first wrong
    one. ``null`` is the same as leaving the option out."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            continue
        kind = SPEC.get(name)
        if kind is None:
            out[name] = value  # "inputs" and the like: checked where they are read
            continue
        out[name] = _one(name, value, kind)
    return out


def _one(name: str, value: Any, kind: tuple[str, ...] | str) -> Any:
    if isinstance(kind, tuple):
        if not isinstance(value, str) or value not in kind:
            raise _wrong(name, f"{name} is one of {', '.join(kind)}, not {_show(value)}.", "Unknown value.")
        return value
    if kind == "text":
        if not isinstance(value, str) or len(value) > 1000:
            raise _wrong(name, f"{name} is text (up to 1000 characters), not {_show(value)}.", "Expected text.")
        return value
    if kind == "whole":
        return _whole(name, value)
    if kind == "flag":
        flag = _FLAGS.get(value.strip().lower()) if isinstance(value, str) else value
        if not isinstance(flag, bool):
            raise _wrong(name, f"{name} is true or false, not {_show(value)}.", "Expected true or false.")
        return flag
    if kind == "names":
        names = [part for part in value.split(",") if part] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(item, str) for item in names):
            raise _wrong(name, f"{name} is a list of output names, not {_show(value)}.", "Expected names.")
        return names
    if not isinstance(value, list):  # "list": its items are checked where they are used
        raise _wrong(name, f"{name} is a list, not {_show(value)}.", "Expected a list.")
    return value


def _whole(name: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    low, high = RANGES.get(name, (0, max_threads()))
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _wrong(name, f"{name} is a whole number from {low} to {high}, not {_show(value)}."
                     + (" (threads and worker_num: 0 is the worker's default)" if name != "batch_size" else ""),
                     "Out of range." if isinstance(value, int) and not isinstance(value, bool) else
                     "Expected a whole number.")
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _wrong(name: str, detail: str, short: str) -> HubError:
    return HubError("invalid", detail, errors={name: [short]})


@dataclass
class Options:
    """How to run: device, threads (``worker_num``), sync or not, what to do without a worker."""

    device: str = "cpu"
    threads: int = 0
    mode: str = "auto"
    if_no_worker: str = "refuse"
    outputs: list[str] = field(default_factory=list)
    account: str = ""  # the Slurm account a job is billed to (hub.orgs.billing); empty: the owner's default

    @classmethod
    def parse(cls, values: dict[str, Any]) -> Options:
        def pick(name: str, allowed: tuple[str, ...], default: str) -> str:
            value = values.get(name) or default
            if value not in allowed:
                raise HubError("invalid", f"{name} must be one of {', '.join(allowed)}, not {value!r}.",
                               errors={name: ["Unknown value."]})
            return str(value)

        threads = values.get("threads", values.get("worker_num", 0)) or 0
        try:
            threads = int(threads)
        except (TypeError, ValueError):
            threads = -1
        if not 0 <= threads <= settings.HUB_INFER_MAX_THREADS:
            raise HubError("invalid", f"threads (worker_num) must be between 0 (the worker's default) and "
                                      f"{settings.HUB_INFER_MAX_THREADS}.", errors={"threads": ["Out of range."]})
        outputs = values.get("outputs") or []
        if isinstance(outputs, str):
            outputs = [name for name in outputs.split(",") if name]
        if not isinstance(outputs, list) or not all(isinstance(name, str) for name in outputs):
            raise HubError("invalid", "outputs is a list of output names.", errors={"outputs": ["Expected names."]})
        return cls(device=pick("device", DEVICES, "cpu"), threads=threads, mode=pick("mode", MODES, "auto"),
                   if_no_worker=pick("if_no_worker", IF_NO_WORKER, "refuse"), outputs=outputs,
                   account=str(values.get("account") or "")[:64])


def batch_size(options: dict[str, Any]) -> int:
    """Rows per batch of a run over a dataset; 0 when not given: the worker fits the batch to
    ``HUB_INFER_BATCH_MB`` of inputs (``hpcfair.batches``)."""
    if options.get("batch_size") in (None, ""):
        return 0
    try:
        value = int(options["batch_size"])
    except (TypeError, ValueError):
        value = 0
    if not 1 <= value <= 1_000_000:
        raise HubError("invalid", "batch_size is a whole number from 1.", errors={"batch_size": ["Out of range."]})
    return value


# --- models --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelRef:
    """The ONNX file that answers for a version, and its signature (plain data: it is cached)."""

    version_id: int  # the version holding the ONNX file (the named one, or its conversion)
    pid: str
    name: str  # owner/name@label of that version
    named_id: int  # the version the caller named
    path: str
    sha256: str
    size: int
    inputs: list[dict[str, Any]] | None
    outputs: list[dict[str, Any]] | None
    # the version's other files in the ONNX file's folder, (path relative to that folder, sha256, size): where
    # the worker finds the data files the model's weights name (ONNX external data), if it names any
    beside: tuple[tuple[str, str, int], ...] = ()

    def wire(self) -> dict[str, Any]:
        found = {"sha256": self.sha256, "path": self.path, "size": self.size}
        return {**found, "beside": [list(entry) for entry in self.beside]} if self.beside else found


def steps_of(models: list[ModelRef], links: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """The lane/job description of a chain: each model's file, and how its inputs come from the step before."""
    links = links or [{} for _ in models[1:]]
    return [{**model.wire(), "version_id": model.version_id, **({"links": links[index - 1]} if index else {})}
            for index, model in enumerate(models)]


# --- the request body ----------------------------------------------------------------------------------


def base_media_type(content_type: str | None) -> str:
    return (content_type or tensors.JSON).split(";")[0].strip().lower()


def parse_body(query: Mapping[str, str], body: bytes, kind: str, fields: tuple[str, ...] = OPTION_NAMES
               ) -> tuple[dict[str, Any], Any, str]:
    """(options, raw inputs, the request's format: json, npy or npz) from the query, the body and its media
    type; options come from the query and, for JSON, the body."""
    options: dict[str, Any] = {name: query[name] for name in OPTION_NAMES if name in query}
    if kind in tensors.NPY_TYPES:
        return check(options), tensors.read_npy(body), "npy"
    if kind in tensors.NPZ_TYPES:
        return check(options), tensors.read_npz(body), "npz"
    if kind != tensors.JSON:
        raise HubError("unsupported_media_type", f"Send inputs as application/json, {tensors.NPY} (.npy) or "
                                                 f"{tensors.NPZ} (.npz), not {kind}.")
    data = load_json(body or b"{}", walk=False)
    if not isinstance(data, dict):
        raise HubError("malformed_request", 'The JSON body is an object: {"inputs": {...}, "device": "cpu", ...}.')
    unknown = sorted(set(data) - set(fields) - {"inputs"})
    if unknown:
        raise HubError("invalid", f"Unknown field {unknown[0]!r}; the fields are inputs, "
                                  f"{', '.join(fields)}.", errors={unknown[0]: ["Unknown field."]})
    options.update({k: v for k, v in data.items() if k != "inputs"})
    return check(options), data.get("inputs"), "json"


@dataclass(frozen=True)
class InferRequest:
    """One inference (or chain) request, parsed once from its query, body and headers: the WSGI express path,
    the DRF views and the pipeline all take it (as MLflow's ``invocations`` parses once)."""

    options: Options
    fields: dict[str, Any]  # every option as sent (a chain's models, links, merge, name…)
    raw: Any  # the inputs as sent (JSON values, or the .npy/.npz arrays)
    sent: str  # json, npy or npz
    answer_format: str  # json, npy or npz
    batch_size: int  # rows per batch of a run over a dataset; 0: fitted by the worker

    @classmethod
    def parse(cls, query: Mapping[str, str], body: bytes, content_type: str | None, accept: str,
              fields: tuple[str, ...] = OPTION_NAMES) -> InferRequest:
        """The request, or the coded error (400/415) of its first problem: the body, then the options."""
        values, raw, sent = parse_body(query, body, base_media_type(content_type), fields)
        return cls(options=Options.parse(values), fields=values, raw=raw, sent=sent,
                   answer_format=output_format(accept, values, sent), batch_size=batch_size(values))

    @property
    def file(self) -> str:
        """The ONNX file of the version asked for, when it has several."""
        return str(self.fields.get("file") or "")

    @property
    def dataset(self) -> str:
        """A dataset version to run over (a batch run, always a job), or empty."""
        return str(self.fields.get("dataset") or "")

    @property
    def dataset_file(self) -> str:
        return str(self.fields.get("dataset_file") or "")

    def arrays(self, model: ModelRef) -> dict[str, np.ndarray]:
        """The inputs, checked against ``model``'s signature."""
        return input_arrays(self.raw, self.sent, model)


def raw_arrays(raw: Any, sent: str, model: ModelRef) -> dict[str, Any]:
    """The inputs keyed by the model's input names (a bare .npy or JSON array feeds a one-input model)."""
    names = [item["name"] for item in model.inputs or []]
    if sent == "npy":
        return {names[0] if names else "input": raw} if len(names) <= 1 else _one_array_for_many(names)
    if sent == "npz":
        return raw
    if raw is None:
        raise HubError("invalid_inputs", "The body has no inputs.", expected=tensors.describe(model.inputs))
    return tensors.from_json(raw, names)


def _one_array_for_many(names: list[str]) -> dict[str, Any]:
    raise HubError("invalid_inputs", f"A .npy body holds one array but the model has {len(names)} inputs "
                                     f"({', '.join(names)}); send an .npz keyed by input name or JSON.")


def input_arrays(raw: Any, sent: str, model: ModelRef) -> dict[str, np.ndarray]:
    """The arrays to run, checked against the model's signature (a 400 says what was expected)."""
    return tensors.check(raw_arrays(raw, sent, model), model.inputs, from_json_body=sent == "json")


# --- the answer ----------------------------------------------------------------------------------------

TIMING_KEYS = ("device", "provider", "worker", "run_ms", "lane_ms", "serve_ms")
SERVER_TIMING = (("lane", "lane_ms"), ("run", "run_ms"), ("serve", "serve_ms"))


def output_format(accept: str, options: dict[str, Any], sent: str) -> str:
    """``output_format`` if given, else the Accept header, else the request's own format."""
    wanted = options.get("output_format")
    if not wanted:
        wanted = next((name for name, media in tensors.FORMATS.items() if media in accept), sent)
    if wanted not in tensors.FORMATS:
        raise HubError("invalid", f"output_format is json, npy or npz, not {wanted!r}.",
                       errors={"output_format": ["Unknown value."]})
    return wanted


def timings(meta: dict[str, Any]) -> dict[str, Any]:
    """What of a worker's answer goes into the answer: where it ran and how long each part took."""
    return {key: meta[key] for key in TIMING_KEYS if key in meta}


def encode_answer(outputs: dict[str, np.ndarray], fmt: str, info: dict[str, Any], model: ModelRef
                  ) -> tuple[bytes, str, dict[str, str]]:
    """A run's answer: its body, media type and the ``X-Hub-*`` and ``Server-Timing`` headers."""
    body, content_type = tensors.encode(outputs, fmt, {**info, "model": {"pid": model.pid, "file": model.path}})
    provider = info.get("provider", "")
    return body, content_type, {
        "X-Hub-Device": info.get("device", ""),
        "X-Hub-Provider": provider if isinstance(provider, str) else ",".join(provider),
        "X-Hub-Model": model.pid,
        "Server-Timing": ", ".join(f"{name};dur={info[key]}" for name, key in SERVER_TIMING if key in info),
    }


def no_worker(device: str) -> HubError:
    """The refusal when no worker serves ``device`` (and the caller did not ask to queue)."""
    what = "GPU" if device == "gpu" else "CPU"
    return HubError("no_worker", f"No {what} worker is running, so nothing can run on '{device}' now. Ask for "
                                 "if_no_worker: queue to wait for one as a job, or choose another device.",
                    device=device)
