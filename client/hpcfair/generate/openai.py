"""OpenAI's chat and completion shapes over the hub's generation pieces, written once: the hub's own ``/v1/*``
(``hub.generation.api.views``) and a served model's server on a node (``hpcfair.serve``) both parse requests and
shape answers here. Nothing here imports Django."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from hpcfair.compute.errors import CodedError
from hpcfair.generate.run import GenerateRequest

FIELDS = frozenset({"model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop", "n",
                    "user", "top_k", "frequency_penalty", "presence_penalty", "stream_options", "stream"})
DEFAULT_TOKENS = 256


@dataclass(frozen=True)
class Asked:
    """An OpenAI request, checked: what to generate, whether to stream, and whether to end with the usage."""

    request: GenerateRequest
    stream: bool = False
    usage: bool = False


def parse(body: Any, *, chat: bool, max_tokens: int, also: Iterable[str] = ()) -> Asked:
    """A chat (``messages``) or completion (``prompt``) request; ``CodedError('invalid', …)`` naming what is wrong.
    ``also``: fields the caller reads itself (allowed here, not read)."""
    if not isinstance(body, dict):
        raise CodedError("invalid", "Send a JSON object.")
    key = "messages" if chat else "prompt"
    fields = FIELDS | {key} | set(also)
    unknown = sorted(set(body) - fields)
    if unknown:
        raise CodedError("invalid", f"Unknown field {unknown[0]!r}; a generation takes {', '.join(sorted(fields))}.")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise CodedError("invalid", "'stream' must be true or false.")
    n = body.get("n", 1)
    if n is not None and (isinstance(n, bool) or n != 1):
        raise CodedError("invalid", "Only n = 1 is offered.")
    if not isinstance(body.get("user", ""), str) or len(body.get("user", "")) > 256:
        raise CodedError("invalid", "'user' must be a string of at most 256 characters.")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or set(options) - {"include_usage"}
                                or not isinstance(options.get("include_usage", False), bool)):
        raise CodedError("invalid", "'stream_options' takes only {\"include_usage\": true|false}.")
    if options is not None and not stream:
        raise CodedError("invalid", "'stream_options' goes with \"stream\": true only.")
    for penalty in ("frequency_penalty", "presence_penalty"):
        if body.get(penalty):
            raise CodedError("invalid", f"'{penalty}' is not offered; leave it 0.")
    prompt = body.get(key)
    if not chat and isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    request = GenerateRequest.parse({
        key: prompt, "max_new_tokens": DEFAULT_TOKENS if limit is None else limit,
        "temperature": body.get("temperature"), "top_p": body.get("top_p"), "top_k": body.get("top_k"),
        "seed": body.get("seed"), "stop": body.get("stop")}, max_tokens=max_tokens)
    return Asked(request, stream, bool(options and options.get("include_usage")))


def collect(pieces: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The whole answer of a generation's pieces: its text and the last piece's totals; ``CodedError`` with the
    code of an error piece."""
    text: list[str] = []
    for piece in pieces:
        if "error" in piece:
            raise CodedError(piece["error"], piece["detail"])
        text.append(piece["text"])
        if piece.get("done"):
            return {"text": "".join(text), **{k: v for k, v in piece.items() if k not in ("text", "done")}}
    raise CodedError("internal_error", "The generation ended without its last piece.")


def completion(answer: dict[str, Any], *, chat: bool, ident: str, created: int, model: str) -> dict[str, Any]:
    """OpenAI's ``chat.completion`` or ``text_completion`` object of a whole answer (``collect``)."""
    choice = ({"message": {"role": "assistant", "content": answer["text"]}} if chat
              else {"text": answer["text"], "logprobs": None})
    return {"id": ident, "object": "chat.completion" if chat else "text_completion", "created": created,
            "model": model, "choices": [{"index": 0, **choice, "finish_reason": reason(answer["finish_reason"])}],
            "usage": usage_of(answer)}


def chunks(pieces: Iterable[dict[str, Any]], *, chat: bool, ident: str, created: int, model: str,
           usage: bool = False) -> Iterator[bytes]:
    """OpenAI's stream of a generation's pieces: server-sent events, then ``data: [DONE]``; an error piece ends it
    with an error event."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    first = True
    for piece in pieces:
        if "error" in piece:
            yield _data({"error": {"message": piece["detail"], "code": piece["error"], "type": "server_error"}})
            return
        done = piece.get("done")
        if piece["text"] or first or done:
            if chat:
                delta = {"role": "assistant", "content": piece["text"]} if first else {"content": piece["text"]}
                choice: dict[str, Any] = {"index": 0, "delta": delta if piece["text"] or first else {}}
            else:
                choice = {"index": 0, "text": piece["text"], "logprobs": None}
            choice["finish_reason"] = reason(piece["finish_reason"]) if done else None
            yield _data({"id": ident, "object": kind, "created": created, "model": model, "choices": [choice]})
            first = False
        if done and usage:
            yield _data({"id": ident, "object": kind, "created": created, "model": model, "choices": [],
                         "usage": usage_of(piece)})
    yield b"data: [DONE]\n\n"


def request_of(asked: GenerateRequest, model: str) -> tuple[str, dict[str, Any]]:
    """The OpenAI route and streamed body of a hub request (``pieces_of`` reads the answer): what the hub sends a
    served model's server for its own ``…/generate``."""
    body: dict[str, Any] = {"model": model, "max_tokens": asked.max_new_tokens, "temperature": asked.temperature,
                            "top_p": asked.top_p, "stream": True, "stream_options": {"include_usage": True}}
    if asked.top_k:
        body["top_k"] = asked.top_k
    if asked.seed is not None:
        body["seed"] = asked.seed
    if asked.stop:
        body["stop"] = list(asked.stop)
    if asked.messages:
        return "chat/completions", {**body, "messages": [dict(m) for m in asked.messages]}
    return "completions", {**body, "prompt": asked.prompt}


def pieces_of(lines: Iterable[bytes], clock: Callable[[], float] = time.monotonic) -> Iterator[dict[str, Any]]:
    """The hub's pieces (``Piece.to_dict``) of an OpenAI stream's lines (``chunks``' shape, as any OpenAI server
    sends it): one piece per text chunk, then the last with the totals once ``data: [DONE]`` comes; an error event
    is an ``{"error", "detail"}`` piece, and so is a stream that ends without ``[DONE]``."""
    started, first = clock(), 0.0
    finish, usage = "", {}
    for line in lines:
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            yield {"text": "", "done": True, "finish_reason": finish or "stop",
                   "prompt_tokens": int(usage.get("prompt_tokens") or 0),
                   "completion_tokens": int(usage.get("completion_tokens") or 0),
                   "seconds_to_first": round(first, 4), "seconds": round(clock() - started, 4)}
            return
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if isinstance(event.get("error"), dict):
            yield {"error": str(event["error"].get("code") or "internal_error"),
                   "detail": str(event["error"].get("message") or "The model's server failed.")}
            return
        usage = event.get("usage") or usage
        for choice in event.get("choices") or []:
            text = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
            finish = choice.get("finish_reason") or finish
            if text:
                first = first or clock() - started
                yield {"text": str(text)}
    yield {"error": "worker_timeout", "detail": "The model's server stopped answering before the end."}


def _data(value: Any) -> bytes:
    return b"data: " + json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def reason(finish: str) -> str:
    """OpenAI's finish reason of the hub's."""
    return "length" if finish in ("length", "time") else "stop"


def usage_of(piece: dict[str, Any]) -> dict[str, int]:
    return {"prompt_tokens": piece["prompt_tokens"], "completion_tokens": piece["completion_tokens"],
            "total_tokens": piece["prompt_tokens"] + piece["completion_tokens"]}


def error(code: str, detail: str) -> dict[str, Any]:
    """OpenAI's error body."""
    return {"error": {"message": detail, "type": "server_error" if code == "internal_error" else
                      "invalid_request_error", "code": code, "param": None}}
