"""REST: ``POST …/versions/{v}/generate`` (the hub's own: server-sent events or JSON), and the
OpenAI-compatible ``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings`` and ``/v1/models`` (the hub
token as the API key, ``model`` a hub reference: ``owner/name[@version]`` or a PID)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import IsAuthenticatedReader
from hub.bounded import JSONParser
from hub.errors import STATUS, HubError
from hub.gateway.api.views import ForceNegotiation  # answers are SSE or JSON whatever Accept says
from hub.gateway.memory import CachedBearerAuthentication
from hub.generation import embeddings, services
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
    ``"stream": false``, one JSON answer."""
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
        pieces = services.stream_generation(found, asked, device, request.user)
        if not stream:
            return Response(_collect(pieces))
        return sse(_hub_events(pieces))


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
    text: list[str] = []
    for piece in pieces:
        if "error" in piece:
            raise HubError(piece["error"] if piece["error"] in STATUS else "internal_error", piece["detail"])
        text.append(piece["text"])
        if piece.get("done"):
            return {"text": "".join(text), **{k: v for k, v in piece.items() if k not in ("text", "done")}}
    raise HubError("internal_error", "The generation ended without its last piece.")


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
    FIELDS = {"model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop", "n", "user",
              "top_k", "frequency_penalty", "presence_penalty", "stream_options"}

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
        key = "messages" if self.chat else "prompt"
        fields, stream, _ = _options(body, self.FIELDS | {key}, stream_default=False)
        n = fields.get("n", 1)
        if n is not None and (isinstance(n, bool) or n != 1):
            raise HubError("invalid", "Only n = 1 is offered.")
        if not isinstance(fields.get("user", ""), str) or len(fields.get("user", "")) > 256:
            raise HubError("invalid", "'user' must be a string of at most 256 characters.")
        options = fields.get("stream_options")
        if options is not None and (not isinstance(options, dict) or set(options) - {"include_usage"}
                                    or not isinstance(options.get("include_usage", False), bool)):
            raise HubError("invalid", "'stream_options' takes only {\"include_usage\": true|false}.")
        if options is not None and not stream:
            raise HubError("invalid", "'stream_options' goes with \"stream\": true only.")
        limit = fields.get("max_completion_tokens", fields.get("max_tokens"))
        for penalty in ("frequency_penalty", "presence_penalty"):
            if fields.get(penalty):
                raise HubError("invalid", f"'{penalty}' is not offered; leave it 0.")
        prompt = fields.get(key)
        if not self.chat and isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        asked = services.parse_request({
            key: prompt, "max_new_tokens": 256 if limit is None else limit,
            "temperature": fields.get("temperature"), "top_p": fields.get("top_p"), "top_k": fields.get("top_k"),
            "seed": fields.get("seed"), "stop": fields.get("stop")})
        model = body["model"]
        pieces = services.stream_generation(services.named(request.user, model), asked, user=request.user)
        ident, created = f"{'chatcmpl' if self.chat else 'cmpl'}-{uuid.uuid4().hex}", int(time.time())
        if stream:
            usage = isinstance(fields.get("stream_options"), dict) and fields["stream_options"].get("include_usage")
            return sse(self._chunks(pieces, ident, created, model, bool(usage)))
        answer = _collect(pieces)
        choice = ({"message": {"role": "assistant", "content": answer["text"]}} if self.chat
                  else {"text": answer["text"], "logprobs": None})
        return Response({"id": ident, "object": "chat.completion" if self.chat else "text_completion",
                         "created": created, "model": model,
                         "choices": [{"index": 0, **choice, "finish_reason": _reason(answer["finish_reason"])}],
                         "usage": _usage(answer)})

    def _chunks(self, pieces, ident: str, created: int, model: str, usage: bool) -> Iterator[bytes]:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        first = True
        for piece in pieces:
            if "error" in piece:
                yield b"data: " + orjson.dumps({"error": {"message": piece["detail"], "code": piece["error"],
                                                          "type": "server_error"}}) + b"\n\n"
                return
            done = piece.get("done")
            if piece["text"] or first or done:
                if self.chat:
                    delta = {"role": "assistant", "content": piece["text"]} if first else {"content": piece["text"]}
                    choice = {"index": 0, "delta": delta if piece["text"] or first else {}}
                else:
                    choice = {"index": 0, "text": piece["text"], "logprobs": None}
                choice["finish_reason"] = _reason(piece["finish_reason"]) if done else None
                yield b"data: " + orjson.dumps({"id": ident, "object": kind, "created": created, "model": model,
                                                "choices": [choice]}) + b"\n\n"
                first = False
            if done and usage:
                yield b"data: " + orjson.dumps({"id": ident, "object": kind, "created": created, "model": model,
                                                "choices": [], "usage": _usage(piece)}) + b"\n\n"
        yield b"data: [DONE]\n\n"


def _reason(reason: str) -> str:
    return "length" if reason in ("length", "time") else "stop"


def _usage(piece: dict[str, Any]) -> dict[str, int]:
    return {"prompt_tokens": piece["prompt_tokens"], "completion_tokens": piece["completion_tokens"],
            "total_tokens": piece["prompt_tokens"] + piece["completion_tokens"]}


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
    """``/v1/models``'s entries for ``user``: generation builds, text encoders and GGUF files (newest 1,000 each)."""
    visible = Artifact.objects.live().visible_to(user)
    found = (Version.objects.filter(artifact__in=visible, deleted_at__isnull=True,
                                    metadata__format__in=services.FORMATS, metadata__has_key="generation")
             .select_related("artifact__owner").prefetch_related("provenance__target")
             .order_by("-created", "-id")[:1000])

    def entry(name: str, version: Version) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": int(version.created.timestamp()),
                "owned_by": version.artifact.owner.username}

    return [*(entry(name, v) for name, v in services.names_of_builds(found).items()),
            *(entry(f"{v.artifact.full_name}@{v.label}", v) for v in embeddings.embedding_models(user)),
            *(entry(f"{v.artifact.full_name}@{v.label}", v) for v in services.gguf_models(visible))]


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
