"""REST: run a model (``…/infer``), chain or merge models (``/collaborate``), benchmark a model
(``…/benchmark``). Short runs answer with the outputs; long runs, batch runs over a dataset, merges and
benchmarks answer 202 with a job."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.authentication import SessionAuthentication
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import IsAuthenticatedReader, TokenScopePermission
from hub.bounded import JSONParser, load_json
from hub.errors import HubError
from hub.gateway import express, fastpath, services, tensors
from hub.gateway.fastpath import CachedBearerAuthentication
from hub.gateway.lane import NoWorker, Stale
from hub.gateway.options import check as options_check
from hub.jobs.api.serializers import JobSerializer
from hub.jobs.api.views import accepted
from hub.registry.api.views import require_write
from hub.registry.models import Version
from hub.registry.services import get_artifact, get_version

OPTION_NAMES = ("device", "threads", "worker_num", "mode", "if_no_worker", "outputs", "output_format", "file",
                "dataset", "dataset_file", "batch_size")


class _DeferredTensorParser(BaseParser):
    """Lets DRF accept a tensor body without reading it: ``read_body`` reads it (with its size limit).

    DRF consults the parsers when a session's CSRF check looks at the form data; without one for these
    types a browser's .npy body would be refused as an unsupported media type."""

    def parse(self, stream, media_type=None, parser_context=None) -> dict:
        return {}


def _tensor_parser(media: str) -> type[BaseParser]:
    return type(f"Deferred{media.rsplit('/', 1)[-1].title()}Parser", (_DeferredTensorParser,), {"media_type": media})


TENSOR_PARSERS = [JSONParser, *(_tensor_parser(media) for media in sorted(tensors.NPY_TYPES | tensors.NPZ_TYPES))]


class ForceNegotiation:
    """Answers are JSON, .npy or .npz as the request asks; DRF's renderers are not consulted."""

    def perform_content_negotiation(self, request, force=False):
        return super().perform_content_negotiation(request, force=True)


def read_body(request: Request) -> bytes:
    """The raw body, refused above ``HUB_INFER_MAX_BYTES`` before it is read."""
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    if length > settings.HUB_INFER_MAX_BYTES:
        raise HubError("request_too_large", f"The request is {length / 2**20:.0f} MiB; the limit is "
                                            f"{settings.HUB_INFER_MAX_BYTES / 2**20:.0f} MiB. Upload the inputs as a "
                                            "dataset artifact and run over it (dataset: owner/name).")
    return request._request.read() if length else b""


def media_type(request: Request) -> str:
    return base_media_type(request.META.get("CONTENT_TYPE"))


def base_media_type(content_type: str | None) -> str:
    return (content_type or tensors.JSON).split(";")[0].strip().lower()


def parse_request(request: Request, fields: tuple[str, ...] = OPTION_NAMES) -> tuple[dict[str, Any], Any, str]:
    """(options, raw inputs, the request's format); options come from the query and, for JSON, the body."""
    return parse_body(request.query_params, read_body(request), media_type(request), fields)


def parse_body(query: Mapping[str, str], body: bytes, kind: str, fields: tuple[str, ...] = OPTION_NAMES
               ) -> tuple[dict[str, Any], Any, str]:
    """``parse_request`` on the query, the body and its media type (the express path calls it directly)."""
    options: dict[str, Any] = {name: query[name] for name in OPTION_NAMES if name in query}
    if kind in tensors.NPY_TYPES:
        return options_check(options), tensors.read_npy(body), "npy"
    if kind in tensors.NPZ_TYPES:
        return options_check(options), tensors.read_npz(body), "npz"
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
    return options_check(options), data.get("inputs"), "json"


def output_format(accept: str, options: dict[str, Any], sent: str) -> str:
    """``output_format`` if given, else the Accept header, else the request's own format."""
    wanted = options.get("output_format")
    if not wanted:
        wanted = next((name for name, media in tensors.FORMATS.items() if media in accept), sent)
    if wanted not in tensors.FORMATS:
        raise HubError("invalid", f"output_format is json, npy or npz, not {wanted!r}.",
                       errors={"output_format": ["Unknown value."]})
    return wanted


def raw_arrays(raw: Any, sent: str, model: services.ModelRef) -> dict[str, Any]:
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


def respond(outputs: dict[str, np.ndarray], fmt: str, info: dict[str, Any], model: services.ModelRef
            ) -> HttpResponse:
    body, content_type, headers = answer(outputs, fmt, info, model)
    return HttpResponse(body, content_type=content_type, headers=headers)


def answer(outputs: dict[str, np.ndarray], fmt: str, info: dict[str, Any], model: services.ModelRef
           ) -> tuple[bytes, str, dict[str, str]]:
    """A run's answer: its body, media type and the ``X-Hub-*`` and ``Server-Timing`` headers."""
    body, content_type = tensors.encode(outputs, fmt, {**info, "model": {"pid": model.pid, "file": model.path}})
    provider = info.get("provider", "")
    return body, content_type, {
        "X-Hub-Device": info.get("device", ""),
        "X-Hub-Provider": provider if isinstance(provider, str) else ",".join(provider),
        "X-Hub-Model": model.pid,
        "Server-Timing": ", ".join(f"{name};dur={info[key]}" for name, key in
                                   (("lane", "lane_ms"), ("run", "run_ms"), ("serve", "serve_ms")) if key in info),
    }


def run_or_queue(steps: list[dict[str, Any]], arrays: dict[str, np.ndarray], options: services.Options,
                 start_job, handed: express.HandedOver | None = None
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray]] | Response:
    """The synchronous call, or 202 with the job ``start_job(reason)`` makes when the run is too big, too
    long, or waits for a worker. ``handed``: the answer the express path already had for these steps."""
    size = sum(array.nbytes for array in arrays.values())
    if options.mode == "async":
        return accepted(start_job("asked for"))
    if size > settings.HUB_INFER_SYNC_MAX_BYTES:
        if options.mode == "sync":
            raise HubError("request_too_large", f"The inputs are {size / 2**20:.0f} MiB; synchronous runs take up to "
                                                f"{settings.HUB_INFER_SYNC_MAX_BYTES / 2**20:.0f} MiB. Use mode auto "
                                                "or async.")
        return accepted(start_job("large inputs"))
    try:
        if handed is not None and handed.steps == steps:
            meta, outputs = handed.take()
        else:
            meta, outputs = services.call(steps, arrays, options, generation=fastpath.memory.generation)
    except NoWorker:
        if options.if_no_worker == "queue":
            return accepted(start_job("waiting for a worker"))
        raise services.no_worker(options.device)
    if not meta.get("ok"):
        if meta.get("code") == "overtime":
            if options.mode == "sync":
                raise HubError("worker_timeout", f"The run took longer than {settings.HUB_INFER_SYNC_S:g} s and was "
                                                 "stopped; use mode auto or async to run it as a job.")
            return accepted(start_job("longer than the synchronous limit"))
        raise services.worker_error(meta)
    return meta, outputs


class Infer(ForceNegotiation, APIView):
    """Run a model version (or its ONNX conversion) on inputs sent as JSON, .npy or .npz."""

    authentication_classes = [CachedBearerAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticatedReader]
    parser_classes = TENSOR_PARSERS

    @extend_schema(
        request={"application/json": {"type": "object", "properties": {
            "inputs": {"description": "{input name: nested array}, or one array for a one-input model"},
            "device": {"enum": list(services.DEVICES)}, "mode": {"enum": list(services.MODES)},
            "if_no_worker": {"enum": list(services.IF_NO_WORKER)},
            "threads": {"type": "integer", "description": "ONNX Runtime threads (the YAML worker_num)"},
            "outputs": {"type": "array", "items": {"type": "string"}},
            "output_format": {"enum": list(tensors.FORMATS)}, "file": {"type": "string"},
            "dataset": {"type": "string", "description": "owner/name[@version] or PID: a batch run (a job)"},
            "dataset_file": {"type": "string"}, "batch_size": {"type": "integer"}}},
            tensors.NPY: {"type": "string", "format": "binary"}, tensors.NPZ: {"type": "string", "format": "binary"}},
        parameters=[OpenApiParameter(name, str, required=False) for name in OPTION_NAMES],
        responses={200: OpenApiResponse(description="Outputs as JSON, .npy or .npz"), 202: JobSerializer},
    )
    def post(self, request: Request, owner: str, name: str, version: str):
        options_raw, raw, sent = parse_request(request)
        return with_current_memory(request, lambda: self.run(request, owner, name, version, options_raw, raw, sent))

    def run(self, request: Request, owner: str, name: str, version: str, options_raw: dict[str, Any], raw: Any,
            sent: str):
        options = services.Options.parse(options_raw)
        fmt = output_format(request.META.get("HTTP_ACCEPT", ""), options_raw, sent)
        file = str(options_raw.get("file") or "")
        batch_size = _batch_size(options_raw)
        model = fastpath.remembered(("model", request.user.pk, owner, name, version, file),
                                    lambda: services.resolve_model(get_version(get_artifact(request.user, owner, name),
                                                                               version), file))
        response = serve(request, [model], None, options, options_raw, raw, sent, fmt, batch_size)
        if response.status_code == 200:
            express.grant(request, owner, name, version, file, model)
        return response


def with_current_memory(request: Request, run):
    """``run()``; when the lane says the remembered answers are out of date, authenticate and resolve again."""
    for _ in range(3):
        try:
            return run()
        except Stale as exc:
            fastpath.refresh(request, exc.generation)
    raise HubError("conflict", "The registry changed three times while this request ran; send it again.")


def serve(request: Request, models: list[services.ModelRef], links: list[dict[str, str]] | None,
          options: services.Options, options_raw: dict[str, Any], raw: Any, sent: str, fmt: str, batch_size: int,
          info: dict[str, Any] | None = None):
    """Run a model or a chain: a batch job over a dataset, or the inputs sent now (at once, or as a job)."""
    user = request.user
    if options_raw.get("dataset"):
        fastpath.memory.validate()
        dataset, path = services.dataset_input(user, str(options_raw["dataset"]),
                                               str(options_raw.get("dataset_file") or ""))
        return accepted(services.start_infer_job(user, models, options, links=links, dataset=dataset,
                                                 dataset_file=path, batch_size=batch_size, reason="batch run"))
    arrays = tensors.check(raw_arrays(raw, sent, models[0]), models[0].inputs, from_json_body=sent == "json")

    def start_job(reason: str):
        fastpath.memory.validate()
        return services.start_infer_job(user, models, options, links=links, arrays=arrays, batch_size=batch_size,
                                        reason=reason)

    result = run_or_queue(services.steps_of(models, links), arrays, options, start_job, express.handed_over(request))
    if isinstance(result, Response):
        return result
    meta, outputs = result
    return respond(outputs, fmt, {**{k: meta[k] for k in TIMING_KEYS if k in meta}, **(info or {})}, models[-1])


TIMING_KEYS = ("device", "provider", "worker", "run_ms", "lane_ms", "serve_ms")


def _batch_size(options: dict[str, Any]) -> int:
    try:
        value = int(options.get("batch_size") or 64)
    except (TypeError, ValueError):
        value = 0
    if not 1 <= value <= 1_000_000:
        raise HubError("invalid", "batch_size is a whole number from 1.", errors={"batch_size": ["Out of range."]})
    return value


COLLABORATE_FIELDS = (*OPTION_NAMES, "models", "links", "merge", "name", "title", "license", "task", "visibility")


class Collaborate(ForceNegotiation, APIView):
    """Run a chain of models (outputs of one into inputs of the next) in one request, or merge the chain
    into one ONNX model published with provenance (``merge: true``, 202 + job)."""

    authentication_classes = [CachedBearerAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticatedReader]
    parser_classes = TENSOR_PARSERS

    @extend_schema(
        request={"application/json": {"type": "object", "required": ["models"], "properties": {
            "models": {"type": "array", "items": {"type": "string"}, "minItems": 2,
                       "description": "owner/name[@version] or PIDs, first to last"},
            "links": {"type": "array", "items": {"type": "object"},
                      "description": "per joint: {input of the next model: output of the one before}; "
                                     "default: by position"},
            "inputs": {"description": "inputs of the first model"}, "merge": {"type": "boolean"},
            "name": {"type": "string", "description": "the merged model's name (merge)"},
            "title": {"type": "string"}, "license": {"type": "string"}, "task": {"type": "string"},
            "visibility": {"enum": ["public", "private"]},
            "device": {"enum": list(services.DEVICES)}, "mode": {"enum": list(services.MODES)},
            "if_no_worker": {"enum": list(services.IF_NO_WORKER)}, "output_format": {"enum": list(tensors.FORMATS)},
            "dataset": {"type": "string"}, "dataset_file": {"type": "string"}, "batch_size": {"type": "integer"}}}},
        responses={200: OpenApiResponse(description="The last model's outputs"), 202: JobSerializer},
    )
    def post(self, request: Request):
        options_raw, raw, sent = parse_request(request, COLLABORATE_FIELDS)
        if sent != "json":
            raise HubError("unsupported_media_type", "Send a chain as a JSON body: {\"models\": [...], "
                                                     "\"inputs\": {...}}.")
        refs = options_raw.get("models")
        if not isinstance(refs, list) or len(refs) < 2 or not all(isinstance(r, str) and r for r in refs):
            raise HubError("invalid", "models is a list of two or more models (owner/name[@version] or PIDs).",
                           errors={"models": ["Expected two or more models."]})
        return with_current_memory(request, lambda: self.run(request, refs, options_raw, raw))

    def run(self, request: Request, refs: list[str], options_raw: dict[str, Any], raw: Any):
        user = request.user
        options = services.Options.parse(options_raw)
        fmt = output_format(request.META.get("HTTP_ACCEPT", ""), options_raw, "json")
        models = [fastpath.remembered(("ref", user.pk, ref), lambda ref=ref: services.model_for(user, ref))
                  for ref in refs]
        links = services.check_links(models, options_raw.get("links"))
        batch_size = _batch_size(options_raw)
        if options_raw.get("merge"):
            fastpath.memory.validate()
            return accepted(services.start_merge_job(
                user, models, links, name=str(options_raw.get("name") or ""), title=str(options_raw.get("title") or ""),
                license=str(options_raw.get("license") or ""), task=str(options_raw.get("task") or ""),
                visibility=str(options_raw.get("visibility") or "")))
        steps = [{"pid": m.pid, "version": m.name, "file": m.path} for m in models]
        return serve(request, models, links, options, options_raw, raw, "json", fmt, batch_size, {"steps": steps})


class VersionBenchmark(APIView):
    """Latency measured on the hub's workers (GET), or a new measurement on a device (POST, 202 + job; for
    the owner and collaborators)."""

    permission_classes = [TokenScopePermission]

    @extend_schema(responses={200: {"type": "object"}})
    def get(self, request: Request, owner: str, name: str, version: str) -> Response:
        from hub.gateway.models import measured

        model = services.resolve_model(get_version(get_artifact(request.user, owner, name), version))
        return Response({"version": model.name, "pid": model.pid,
                         "benchmarks": measured(Version.objects.get(pk=model.version_id))})

    @extend_schema(request={"application/json": {"type": "object", "properties": {
        "device": {"enum": list(services.DEVICES)}, "if_no_worker": {"enum": list(services.IF_NO_WORKER)},
        "batch_sizes": {"type": "array", "items": {"type": "integer"}, "description": "default [1, 8, 32]"},
        "runs": {"type": "integer", "description": "timed runs per batch size (default 50)"},
        "threads": {"type": "integer"}}}}, responses={202: JobSerializer})
    def post(self, request: Request, owner: str, name: str, version: str) -> Response:
        artifact = get_artifact(request.user, owner, name)
        require_write(request, artifact)
        model = services.resolve_model(get_version(artifact, version))
        data = request.data if isinstance(request.data, dict) else {}
        unknown = sorted(set(data) - {"device", "if_no_worker", "batch_sizes", "runs", "threads"})
        if unknown:
            raise HubError("invalid", f"Unknown field {unknown[0]!r}.", errors={unknown[0]: ["Unknown field."]})
        sizes = data.get("batch_sizes", [1, 8, 32])
        runs = data.get("runs", 50)
        if (not isinstance(sizes, list) or not sizes or len(sizes) > 12
                or not all(isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= 4096 for b in sizes)):
            raise HubError("invalid", "batch_sizes is a list of up to 12 whole numbers from 1 to 4096.",
                           errors={"batch_sizes": ["Invalid."]})
        if not isinstance(runs, int) or isinstance(runs, bool) or not 5 <= runs <= 10_000:
            raise HubError("invalid", "runs is a whole number from 5 to 10000.", errors={"runs": ["Out of range."]})
        options = services.Options.parse(options_check({k: data[k] for k in ("device", "if_no_worker", "threads")
                                                        if k in data}))
        return accepted(services.start_benchmark_job(request.user, model, options, batch_sizes=sorted(set(sizes)),
                                                     runs=runs))
