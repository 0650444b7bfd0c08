"""REST: run a model (``…/infer``), chain or merge models (``/collaborate``), benchmark a model
(``…/benchmark``). Short runs answer with the outputs; long runs, batch runs over a dataset, merges and
benchmarks answer 202 with a job."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.authentication import SessionAuthentication
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import IsAuthenticatedReader, TokenScopePermission, require_scope
from hub.bounded import JSONParser
from hub.errors import HubError
from hub.gateway import memory, pipeline, protocol, services, tensors
from hub.gateway.memory import CachedBearerAuthentication
from hub.gateway.protocol import COLLABORATE_FIELDS, OPTION_NAMES, InferRequest, Options
from hub.jobs.api.serializers import JobSerializer
from hub.jobs.api.views import accepted
from hub.jobs.models import Job
from hub.registry.api.views import require_write
from hub.registry.models import Version
from hub.registry.services import get_artifact, get_version


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


def parse_request(request: Request, fields: tuple[str, ...] = OPTION_NAMES) -> InferRequest:
    """The request, parsed once: options come from the query and, for JSON, the body."""
    return InferRequest.parse(request.query_params, read_body(request), request.META.get("CONTENT_TYPE"),
                              request.META.get("HTTP_ACCEPT", ""), fields)


def respond(result: pipeline.Encoded | Job) -> HttpResponse | Response:
    """The pipeline's answer: the outputs (200), or 202 with the job that runs them."""
    if isinstance(result, Job):
        return accepted(result)
    body, content_type, headers = result
    return HttpResponse(body, content_type=content_type, headers=headers)


class Infer(ForceNegotiation, APIView):
    """Run a model version (or its ONNX conversion) on inputs sent as JSON, .npy or .npz."""
    needs_scope = "infer"

    throttle_scope = "inference"  # hub.ops.throttles: the rate of its writes
    authentication_classes = [CachedBearerAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticatedReader]
    parser_classes = TENSOR_PARSERS

    @extend_schema(
        request={"application/json": {"type": "object", "properties": {
            "inputs": {"description": "{input name: nested array}, or one array for a one-input model"},
            "device": {"enum": list(protocol.DEVICES)}, "mode": {"enum": list(protocol.MODES)},
            "if_no_worker": {"enum": list(protocol.IF_NO_WORKER)},
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
        asked = parse_request(request)
        return pipeline.retry_when_stale(request, lambda: self.run(request, owner, name, version, asked))

    def run(self, request: Request, owner: str, name: str, version: str, asked: InferRequest):
        file = asked.file
        model = memory.remembered(("model", memory.who(request.user), owner, name, version, file),
                                  lambda: services.model_of(request.user, get_version(
                                      get_artifact(request.user, owner, name), version), file))
        response = respond(pipeline.run(request.user, [model], asked, earlier=pipeline.earlier_answer(request.META)))
        if response.status_code == 200:
            memory.grant(request, owner, name, version, file, model)
        return response


class Collaborate(ForceNegotiation, APIView):
    """Run a chain of models (outputs of one into inputs of the next) in one request, or merge the chain
    into one ONNX model published with provenance (``merge: true``, 202 + job)."""
    needs_scope = "infer"  # a merge publishes: checked in post

    throttle_scope = "inference"  # hub.ops.throttles: the rate of its writes
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
            "visibility": {"enum": list(protocol.VISIBILITIES)},
            "device": {"enum": list(protocol.DEVICES)}, "mode": {"enum": list(protocol.MODES)},
            "if_no_worker": {"enum": list(protocol.IF_NO_WORKER)}, "output_format": {"enum": list(tensors.FORMATS)},
            "dataset": {"type": "string"}, "dataset_file": {"type": "string"}, "batch_size": {"type": "integer"}}}},
        responses={200: OpenApiResponse(description="The last model's outputs"), 202: JobSerializer},
    )
    def post(self, request: Request):
        if protocol.base_media_type(request.META.get("CONTENT_TYPE")) in tensors.NPY_TYPES | tensors.NPZ_TYPES:
            raise HubError("unsupported_media_type", "Send a chain as a JSON body: {\"models\": [...], "
                                                     "\"inputs\": {...}}.")
        asked = parse_request(request, COLLABORATE_FIELDS)
        refs = asked.fields.get("models")
        if not isinstance(refs, list) or len(refs) < 2 or not all(isinstance(r, str) and r for r in refs):
            raise HubError("invalid", "models is a list of two or more models (owner/name[@version] or PIDs).",
                           errors={"models": ["Expected two or more models."]})
        return pipeline.retry_when_stale(request, lambda: self.run(request, refs, asked))

    def run(self, request: Request, refs: list[str], asked: InferRequest):
        user = request.user
        options_raw = asked.fields
        models = [memory.remembered(("ref", memory.who(user), ref), lambda ref=ref: services.model_for(user, ref))
                  for ref in refs]
        links = services.check_links(models, options_raw.get("links"))
        if options_raw.get("merge"):
            require_scope(request, "publish", "merging models into a new one")
            memory.answers.validate()
            return accepted(services.start_merge_job(
                user, models, links, name=str(options_raw.get("name") or ""), title=str(options_raw.get("title") or ""),
                license=str(options_raw.get("license") or ""), task=str(options_raw.get("task") or ""),
                visibility=str(options_raw.get("visibility") or "")))
        steps = [{"pid": m.pid, "version": m.name, "file": m.path} for m in models]
        return respond(pipeline.run(user, models, asked, links=links, info={"steps": steps},
                                    earlier=pipeline.earlier_answer(request.META)))


class VersionBenchmark(APIView):
    """Latency measured on the hub's workers (GET), or a new measurement on a device (POST, 202 + job; for
    the owner and collaborators)."""
    needs_scope = "infer"

    throttle_scope = "conversions"  # hub.ops.throttles: the rate of its writes
    permission_classes = [TokenScopePermission]

    @extend_schema(responses={200: {"type": "object"}})
    def get(self, request: Request, owner: str, name: str, version: str) -> Response:
        from hub.gateway.models import measured

        model = services.resolve_model(get_version(get_artifact(request.user, owner, name), version))
        return Response({"version": model.name, "pid": model.pid,
                         "benchmarks": measured(Version.objects.get(pk=model.version_id))})

    @extend_schema(request={"application/json": {"type": "object", "properties": {
        "device": {"enum": list(protocol.DEVICES)}, "if_no_worker": {"enum": list(protocol.IF_NO_WORKER)},
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
        options = Options.parse(protocol.check({k: data[k] for k in ("device", "if_no_worker", "threads")
                                                        if k in data}))
        return accepted(services.start_benchmark_job(request.user, model, options, batch_sizes=sorted(set(sizes)),
                                                     runs=runs))
