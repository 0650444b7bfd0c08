"""``/v1/embeddings`` on the hub's side: which versions are text encoders (an ONNX model, the version's own or
its conversion, with a text encoder's inputs and outputs and ``tokenizer.json`` beside it), the request's
checks, and the round trip to a worker's generation engine, which tokenizes, runs and pools in its bounded
child (``hub.generation.engine``, ``hpcfair.embed``)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from django.conf import settings
from hpcfair.embed import HIDDEN, POOLED, TEXT_INPUTS

from hub.errors import STATUS, HubError
from hub.gateway.channel import stream
from hub.gateway.presence import NoWorker, reachable
from hub.gateway.protocol import ModelRef, no_worker
from hub.gateway.services import resolve_model
from hub.registry.files_access import require_files_of
from hub.registry.models import Artifact, Version
from hub.registry.services import resolve_version_ref

QUEUE = "generate-cpu"
ANSWER_GRACE_S = 3.0  # past HUB_GENERATE_S, as a generation waits (hub.generation.services)


def is_encoder_signature(metadata: dict[str, Any]) -> bool:
    """Whether an ONNX version's recorded signature is a text encoder's: token inputs, and pooled embeddings
    or token vectors out."""
    inputs = {i.get("name") for i in metadata.get("inputs") or [] if isinstance(i, dict)}
    outputs = {o.get("name") for o in metadata.get("outputs") or [] if isinstance(o, dict)}
    return "input_ids" in inputs and inputs <= set(TEXT_INPUTS) and bool({POOLED, HIDDEN} & outputs)


def encoder_of(user, ref: str) -> ModelRef:
    """The text encoder (ONNX file) that answers ``ref`` for ``user``, or a coded refusal."""
    version = resolve_version_ref(user, ref)
    require_files_of(user, version)  # embedding reads the model's files (hub.registry.files_access)
    model = resolve_model(version)
    folder = model.path.rpartition("/")[0]
    beside = {path for path, _, _ in model.beside}
    if not is_encoder_signature({"inputs": model.inputs, "outputs": model.outputs}) or "tokenizer.json" not in beside:
        raise HubError("not_runnable", f"{model.name} is not a text encoder: /v1/embeddings takes a model whose ONNX "
                                       f"form has token inputs ({', '.join(TEXT_INPUTS)}), a {POOLED} or {HIDDEN} "
                                       f"output and tokenizer.json beside it{f' in {folder}/' if folder else ''} (a "
                                       "sentence-transformers or encoder folder, converted on upload).")
    return model


def embedding_models(user, limit: int = 1000) -> list[Version]:
    """The newest text encoders ``user`` may use (for ``/v1/models``)."""
    visible = Artifact.objects.live().visible_to(user)
    found = (Version.objects.filter(artifact__in=visible, deleted_at__isnull=True, metadata__format="onnx",
                                    artifact__kind=Artifact.Kind.MODEL, files__path__endswith="tokenizer.json")
             .distinct().select_related("artifact__owner").order_by("-created")[:limit])
    return [v for v in found if is_encoder_signature(v.metadata or {})]


@dataclass
class Asked:
    """A checked embedding request."""

    inputs: list[str | list[int]]
    base64: bool
    dimensions: int | None


def parse(body: dict[str, Any]) -> Asked:
    """The inputs (a string, a list of strings, a list of token ids or a list of such lists), the encoding and the
    dimensions asked for, refused in words."""
    given = body.get("input")
    if isinstance(given, str) or (isinstance(given, list) and given and all(_is_id(i) for i in given)):
        given = [given]
    if not isinstance(given, list) or not given:
        raise HubError("invalid", "'input' is a string, a list of strings, a list of token ids, or a list of such "
                                  "lists, and not empty.")
    for item in given:
        if not (isinstance(item, str) and item) and not (isinstance(item, list) and item
                                                         and all(_is_id(i) for i in item)):
            raise HubError("invalid", "Each input is a non-empty string or a non-empty list of token ids "
                                      "(integers).")
    if len(given) > settings.HUB_EMBED_MAX_INPUTS:
        raise HubError("request_too_large", f"{len(given)} inputs: one request embeds at most "
                                            f"{settings.HUB_EMBED_MAX_INPUTS} (HUB_EMBED_MAX_INPUTS); send them in "
                                            "several requests.")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise HubError("invalid", "'encoding_format' is float or base64.")
    dimensions = body.get("dimensions")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1):
        raise HubError("invalid", "'dimensions' is a positive integer.")
    return Asked(given, encoding == "base64", dimensions)


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def embed(model: ModelRef, asked: Asked) -> tuple[np.ndarray, int]:
    """``asked``'s embeddings by ``model`` on a worker's generation engine, and the tokens they held."""
    _check_dimensions(model, asked, _width(model))
    folder = model.path.rpartition("/")[0]
    onnx = model.path[len(folder) + 1:] if folder else model.path
    files = [[onnx, model.sha256, model.size], *([path, sha, size] for path, sha, size in model.beside)]
    message = orjson.dumps({"files": files, "embed": {"onnx": onnx, "inputs": asked.inputs},
                            "seconds": settings.HUB_GENERATE_S, "max_tokens": settings.HUB_EMBED_MAX_TOKENS})
    with reachable():
        try:
            parts = stream(QUEUE, message, settings.HUB_GENERATE_S + ANSWER_GRACE_S, lambda part: True,
                           grace=ANSWER_GRACE_S)
            answer = orjson.loads(next(parts))
        except NoWorker:
            raise no_worker("cpu") from None
        except TimeoutError:
            raise HubError("worker_timeout", "The embedding engine did not answer in time; try again.") from None
    parts.close()
    if "error" in answer:
        raise HubError(answer["error"] if answer["error"] in STATUS else "internal_error", answer["detail"])
    vectors = np.frombuffer(base64.b64decode(answer["vectors"]), dtype="<f4").reshape(answer["shape"])
    _check_dimensions(model, asked, vectors.shape[1])
    return vectors, int(answer["prompt_tokens"])


def _width(model: ModelRef) -> int | None:
    """The embeddings' width as the signature records it, if it does."""
    for output in model.outputs or []:
        shape = output.get("shape") if isinstance(output, dict) else None
        if output.get("name") in (POOLED, HIDDEN) and isinstance(shape, list) and shape and _is_id(shape[-1]):
            return shape[-1]
    return None


def _check_dimensions(model: ModelRef, asked: Asked, width: int | None) -> None:
    """Only a model's own width is offered: shortening is right only for a model trained for it (Matryoshka)."""
    if asked.dimensions is not None and width is not None and asked.dimensions != width:
        raise HubError("invalid", f"'dimensions' {asked.dimensions} is not offered: {model.name}'s embeddings have "
                                  f"{width} dimensions, and the hub does not shorten them (right only for a model "
                                  "trained to be shortened); leave 'dimensions' out or send "
                                  f"{width}.")


def answer(vectors: np.ndarray, tokens: int, model: str, as_base64: bool) -> dict[str, Any]:
    """OpenAI's embedding list: float lists, or base64 of little-endian float32 as its clients decode them."""
    data = [{"object": "embedding", "index": index,
             "embedding": base64.b64encode(row.astype("<f4").tobytes()).decode() if as_base64 else row.tolist()}
            for index, row in enumerate(vectors)]
    return {"object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
