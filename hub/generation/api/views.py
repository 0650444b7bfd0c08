"""REST: ``POST …/versions/{v}/generate`` (the hub's own: server-sent events or JSON), and the
OpenAI-compatible ``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings`` and ``/v1/models`` (the hub
token as the API key, ``model`` a hub reference: ``owner/name[@version]`` or a PID)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
from django.conf import settings
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from hpcfair.compute import CodedError
from hpcfair.generate import openai
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import IsAuthenticatedReader
from hub.bounded import JSONParser
from hub.errors import STATUS, HubError
from hub.gateway.api.views import ForceNegotiation  # answers are SSE or JSON whatever Accept says
from hub.gateway.memory import CachedBearerAuthentication
from hub.generation import embeddings, services, serving
from hub.jobs.api.views import accepted
from hub.registry.models import Artifact, Version
from hub.registry.services import get_artifact, get_version

GENERATE_FIELDS = {"prompt", "messages", "max_new_tokens", "temperature", "top_p", "top_k", "seed", "stop"}
OPTIONS = {"stream", "device"}
BATCH = {"dataset", "dataset_file"}


def _options(body: Any, fields: set[str], stream_default: bool = True) -> tuple[dict[str, Any], bool, str]:
    """The request's generation fields, whether to stream (the hub streams unless told not to; OpenAI's API
    answers at once unless told to stream), and the device; unknown fields are refused."""
    if not isinstance(body, dict):
        raise HubError("invalid", "Send a JSON object.")
    unknown = sorted(set(body) - fields - OPTIONS)
    if unknown:
        raise HubError("invalid", f"Unknown field {unknown[0]!r}; a generation takes "
                                  f"{', '.join(sorted(fields | OPTIONS))}.")
    stream, device = body.get("stream", stream_default), body.get("device", "cpu")
    if not isinstance(stream, bool):
        raise HubError("invalid", "'stream' must be true or false.")
    if device not in ("cpu", "gpu"):
        raise HubError("invalid", "'device' must be cpu or gpu.")
    return {k: v for k, v in body.items() if k in fields}, stream, device


def event(data: Any, name: str = "") -> bytes:
    """One server-sent event."""
    return (f"event: {name}\n".encode() if name else b"") + b"data: " + orjson.dumps(data) + b"\n\n"


def sse(chunks: Iterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy in front must not hold the stream back
    return response


class Generate(ForceNegotiation, APIView):
    """Generate text with a causal language model version: a prompt or chat messages in, text out, streamed
    as server-sent events (``data: {"text": …}`` per piece, then ``event: done`` with the totals) or, with
    ``"stream": false``, one JSON answer. While a serve job serves the model, its server generates it."""
    needs_scope = "infer"

    throttle_scope = "generation"  # hub.ops.throttles: the rate of its writes
    authentication_classes = [CachedBearerAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticatedReader]
    parser_classes = [JSONParser]

    @extend_schema(
        request={"application/json": {"type": "object", "properties": {
            "prompt": {"type": "string"}, "messages": {"type": "array", "items": {"type": "object"}},
            "max_new_tokens": {"type": "integer"}, "temperature": {"type": "number", "description": "0: greedy"},
            "top_p": {"type": "number"}, "top_k": {"type": "integer"}, "seed": {"type": "integer"},
            "stop": {"type": "array", "items": {"type": "string"}}, "stream": {"type": "boolean"},
            "device": {"enum": ["cpu", "gpu"]},
            "dataset": {"type": "string", "description": "owner/name[@version] or PID: a file of prompts (a job)"},
            "dataset_file": {"type": "string"}}}},
        responses={200: OpenApiResponse(description="text/event-stream, or JSON with stream: false"),
                   202: OpenApiResponse(description="a job over a dataset of prompts")})
    def post(self, request: Request, owner: str, name: str, version: str):
        fields, stream, device = _options(request.data, GENERATE_FIELDS | BATCH)
        found = get_version(get_artifact(request.user, owner, name), version)
        if "dataset" in fields:  # a file of prompts: a job
            options = {k: v for k, v in fields.items() if k not in BATCH}
            if {"prompt", "messages"} & set(options):
                raise HubError("invalid", "Give prompts in a dataset or one prompt, not both.")
            return accepted(services.request_batch(found, request.user, str(fields["dataset"]),
                                                   fields.get("dataset_file"), options, device))
        asked = services.parse_request(fields)
        if endpoint := serving.live_endpoint(found, request.user):  # a serve job's server answers it
            pieces = serving.pieces(endpoint, asked, services.hold_stream(request.user))
        else:
            pieces = services.stream_generation(found, asked, device, request.user)
        if not stream:
            return Response(_collect(pieces))
        return sse(_hub_events(pieces))


class Serve(APIView):
    """Serve a language model on a node: a ``serve`` job runs its own OpenAI-compatible server (the hub's ONNX
    engine or llama.cpp on a CPU node, vLLM for a Hugging Face folder on a GPU node) until it has had no request
    for ``idle_s`` seconds; meanwhile ``/v1/*`` for the model go there, and ``/v1/models`` says its state."""
    needs_scope = "infer"

    authentication_classes = [CachedBearerAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticatedReader]
    parser_classes = [JSONParser]

    @extend_schema(
        request={"application/json": {"type": "object", "properties": {
            "idle_s": {"type": "integer", "description": "seconds without a request before the server stops "
                                                         "(HUB_SERVE_IDLE_S; at most HUB_SERVE_IDLE_MAX_S)"},
            "device": {"enum": ["cpu", "gpu"]}}}},
        responses={202: OpenApiResponse(description="the serve job (a running or queued one of yours if any)")})
    def post(self, request: Request, owner: str, name: str, version: str):
        body = request.data if request.data is not None else {}
        if not isinstance(body, dict) or set(body) - {"idle_s", "device"}:
            raise HubError("invalid", "Send a JSON object with 'idle_s' (seconds) and 'device' (cpu or gpu), or none.")
        found = get_version(get_artifact(request.user, owner, name), version)
        return accepted(serving.request_serve(found, request.user, idle_s=body.get("idle_s"),
                                              device=body.get("device", "cpu")))


def _hub_events(pieces: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for piece in pieces:
        if "error" in piece:
            yield event({"code": piece["error"], "detail": piece["detail"]}, "error")
        elif piece.get("done"):
            if piece["text"]:
                yield event({"text": piece["text"]})
            yield event({k: v for k, v in piece.items() if k not in ("text", "done")}, "done")
        else:
            yield event(piece)


def _collect(pieces: Iterator[dict[str, Any]]) -> dict[str, Any]:
    try:
        return openai.collect(pieces)
    except CodedError as exc:
        raise HubError(exc.code if exc.code in STATUS else "internal_error", exc.detail) from None


# --- OpenAI-compatible endpoints --------------------------------------------------------------------------


def openai_error(code: str, detail: str) -> JsonResponse:
    kind = "invalid_request_error" if STATUS.get(code, 500) < 500 else "server_error"
    response = JsonResponse({"error": {"message": detail, "type": kind, "code": code, "param": None}},
                            status=STATUS.get(code, 500))
    response["X-Error-Code"] = code
    return response


@extend_schema(exclude=True)  # OpenAI's own specification describes these, errors included, not the hub's schema
class OpenAIView(ForceNegotiation, APIView):
    """OpenAI's request and answer shapes over the hub's generation; errors in OpenAI's shape."""
    needs_scope = "infer"
    limited_ok = True  # the model is read by name: a limit hides what lies outside it

    throttle_scope = "generation"  # hub.ops.throttles: the rate of its writes
    authentication_classes = [CachedBearerAuthentication]
    permission_classes = [IsAuthenticatedReader]
    parser_classes = [JSONParser]
    chat = False

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        body = getattr(response, "data", None) or {}
        code = body.get("code") or response.get("X-Error-Code") or "internal_error"
        answer = openai_error(code if code in STATUS else "invalid", str(body.get("detail") or "The request failed."))
        if response.get("Retry-After"):  # throttled, or too many jobs: when to ask again
            answer["Retry-After"] = response["Retry-After"]
        return answer

    def post(self, request: Request):
        body = request.data
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            raise HubError("invalid", "Name the model: 'model' is a hub reference (owner/name[@version] or a PID).")
        if body.get("device", "cpu") not in ("cpu", "gpu"):
            raise HubError("invalid", "'device' must be cpu or gpu.")
        try:
            asked = openai.parse(body, chat=self.chat, max_tokens=settings.HUB_GENERATE_MAX_TOKENS, also={"device"})
        except CodedError as exc:
            raise HubError(exc.code, exc.detail) from None
        model = body["model"]
        version = services.named(request.user, model)
        if endpoint := serving.live_endpoint(version, request.user):  # a serve job's server answers it
            return serving.forward(endpoint, "chat/completions" if self.chat else "completions", body,
                                   services.hold_stream(request.user))
        pieces = services.stream_generation(version, asked.request, user=request.user)
        ident, created = f"{'chatcmpl' if self.chat else 'cmpl'}-{uuid.uuid4().hex}", int(time.time())
        if asked.stream:
            return sse(openai.chunks(pieces, chat=self.chat, ident=ident, created=created, model=model,
                                     usage=asked.usage))
        return Response(openai.completion(_collect(pieces), chat=self.chat, ident=ident, created=created, model=model))


class ChatCompletions(OpenAIView):
    """OpenAI's ``POST /v1/chat/completions``."""

    chat = True


class Completions(OpenAIView):
    """OpenAI's ``POST /v1/completions``."""


class Embeddings(OpenAIView):
    """OpenAI's ``POST /v1/embeddings``: text encoders' vectors (``hub.generation.embeddings``)."""

    FIELDS = {"model", "input", "encoding_format", "dimensions", "user"}

    def post(self, request: Request):
        body = request.data
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            raise HubError("invalid", "Name the model: 'model' is a hub reference (owner/name[@version] or a PID).")
        unknown = sorted(set(body) - self.FIELDS)
        if unknown:
            raise HubError("invalid", f"Unknown field {unknown[0]!r}; an embedding takes "
                                      f"{', '.join(sorted(self.FIELDS))}.")
        if not isinstance(body.get("user", ""), str) or len(body.get("user", "")) > 256:
            raise HubError("invalid", "'user' must be a string of at most 256 characters.")
        asked = embeddings.parse(body)
        model = embeddings.encoder_of(request.user, body["model"])
        vectors, tokens = embeddings.embed(model, asked)
        return Response(embeddings.answer(vectors, tokens, body["model"], asked.base64))


def _listed(user) -> list[dict[str, Any]]:
    """``/v1/models``'s entries for ``user``: generation builds, text encoders and GGUF files (newest 1,000 each),
    and the models serve jobs serve, each with its state (live, starting, queued, offline)."""
    visible = Artifact.objects.live().visible_to(user)
    found = (Version.objects.filter(artifact__in=visible, deleted_at__isnull=True,
                                    metadata__format__in=services.FORMATS, metadata__has_key="generation")
             .select_related("artifact__owner").prefetch_related("provenance__target")
             .order_by("-created", "-id")[:1000])
    listed = [*services.names_of_builds(found).items(),
              *((_label(v), v) for v in embeddings.embedding_models(user)),
              *((_label(v), v) for v in services.gguf_models(visible))]
    served = serving.states(visible)
    shown = {v.pk for _, v in listed}
    listed += [(_label(v), v) for v in Version.objects.filter(pk__in=set(served) - shown)
               .select_related("artifact__owner").order_by("-created", "-id")]
    return [{"id": name, "object": "model", "created": int(v.created.timestamp()),
             "owned_by": v.artifact.owner.username, **({"state": served[v.pk]} if v.pk in served else {})}
            for name, v in listed]


def _label(version: Version) -> str:
    return f"{version.artifact.full_name}@{version.label}"


@extend_schema(exclude=True)
class Models(APIView):
    """OpenAI's ``GET /v1/models``: the generation models and text encoders this token may use (newest 1,000
    of each); ``GET /v1/models/{id}`` one of them (``client.models.retrieve``)."""

    authentication_classes = [CachedBearerAuthentication]
    permission_classes = [IsAuthenticatedReader]

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        body = getattr(response, "data", None) or {}
        return openai_error(body.get("code") if body.get("code") in STATUS else "invalid",
                            str(body.get("detail") or "The request failed."))

    def get(self, request: Request, model: str | None = None) -> HttpResponse:
        listed = _listed(request.user)
        if model is None:
            return Response({"object": "list", "data": listed})
        found = next((entry for entry in listed if entry["id"] == model), None)
        if found is None:
            raise HubError("not_found", f"No model {model[:200]!r} for this token: GET /v1/models lists the ids it "
                                        "may use (owner/name or owner/name@version).")
        return Response(found)
