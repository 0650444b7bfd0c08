"""Run a generation model: a folder onnxruntime-genai built (``genai_config.json``, ``model.onnx`` and its
weights, the tokenizer), run by onnxruntime-genai, or a folder of the general route (``kv_config.json``,
``hpcfair.generate.torch_export``), run by ``hpcfair.generate.onnx_loop`` on ONNX Runtime. A prompt or chat
messages in, text out piece by piece, with the model's KV cache (each new token runs the model on that token
alone).

``GenerateRequest.parse`` checks what a caller sends (the hub's API, the OpenAI-compatible endpoints, a
job's prompts file) and says what is wrong in words; ``generate`` yields ``Piece``s, the last one with
``done`` set, its ``finish_reason`` (``stop``: the model's end token or a stop string; ``length``:
``max_new_tokens`` or the model's context) and the token counts."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcfair.compute.errors import CodedError

MAX_STOPS = 4
MAX_PROMPT_CHARS = 200_000


@dataclass(frozen=True)
class GenerateRequest:
    """What to generate, checked (``parse``)."""

    prompt: str = ""
    messages: tuple[dict[str, str], ...] = ()
    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def to_dict(self) -> dict[str, Any]:
        """The request as ``parse`` takes it."""
        said = {"messages": list(self.messages)} if self.messages else {"prompt": self.prompt}
        return {**said, "max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "top_k": self.top_k, "seed": self.seed, "stop": list(self.stop)}

    @classmethod
    def parse(cls, data: Any, *, max_tokens: int = 4096) -> GenerateRequest:
        """A request from JSON-like ``data``; ``CodedError('invalid', …)`` naming the field that is wrong."""
        if not isinstance(data, dict):
            raise CodedError("invalid", "A generation request is a JSON object with a 'prompt' or 'messages'.")
        prompt, messages = data.get("prompt"), data.get("messages")
        if (prompt is None) == (messages is None):
            raise CodedError("invalid", "Give either 'prompt' (text) or 'messages' (a chat: a list of "
                                        "{'role': …, 'content': …}), not both or neither.")
        if prompt is not None and (not isinstance(prompt, str) or not prompt):
            raise CodedError("invalid", "'prompt' must be a non-empty string.")
        if messages is not None and (not isinstance(messages, list) or not messages):
            raise CodedError("invalid", "'messages' must be a non-empty list of {'role': …, 'content': …}.")
        chat = tuple(_message(m, i) for i, m in enumerate(messages)) if messages is not None else ()
        if len(prompt or "") + sum(len(m["content"]) for m in chat) > MAX_PROMPT_CHARS:
            raise CodedError("invalid", f"The prompt is longer than {MAX_PROMPT_CHARS:,} characters.")
        stop = data.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else stop
        if not isinstance(stop, (list, tuple)) or len(stop) > MAX_STOPS or not all(
                isinstance(s, str) and s for s in stop):
            raise CodedError("invalid", f"'stop' must be a string or a list of up to {MAX_STOPS} non-empty strings.")
        seed = data.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31):
            raise CodedError("invalid", "'seed' must be an integer from 0 to 2147483647.")
        return cls(prompt=prompt or "", messages=chat,
                   max_new_tokens=_number(data, "max_new_tokens", 128, int, 1, max_tokens),
                   temperature=_number(data, "temperature", 1.0, float, 0.0, 2.0),
                   top_p=_number(data, "top_p", 1.0, float, 0.0, 1.0, low_open=True),
                   top_k=_number(data, "top_k", 0, int, 0, 100_000), seed=seed, stop=tuple(stop))


def _message(message: Any, index: int) -> dict[str, str]:
    """A chat message; its content a string or OpenAI's list of text parts (joined by newlines)."""
    if not (isinstance(message, dict) and isinstance(message.get("role"), str)):
        raise CodedError("invalid", f"messages[{index}] must be {{'role': …, 'content': …}} with strings.")
    content = message.get("content")
    if isinstance(content, list):
        if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                   for p in content):
            raise CodedError("invalid", f"messages[{index}]'s content takes only text parts "
                                        "({'type': 'text', 'text': …}): these models read text, not images or audio.")
        content = "\n".join(part["text"] for part in content)
    if not isinstance(content, str):
        raise CodedError("invalid", f"messages[{index}] must be {{'role': …, 'content': …}} with strings.")
    return {"role": message["role"], "content": content}


def _number(data: dict, name: str, default, kind: type, low, high, low_open: bool = False):
    value = data.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise CodedError("invalid", f"'{name}' must be {'an integer' if kind is int else 'a number'}.")
    if value < low or value > high or (low_open and value == low):
        raise CodedError("invalid", f"'{name}' must be {'above' if low_open else 'from'} {low} "
                                    f"{'and at most' if low_open else 'to'} {high}; it is {value}.")
    return kind(value)


@dataclass
class Piece:
    """Text generated since the last piece; the last piece is ``done`` with the totals."""

    text: str
    done: bool = False
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds_to_first: float = 0.0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text}
        if self.done:
            out.update(done=True, finish_reason=self.finish_reason, prompt_tokens=self.prompt_tokens,
                       completion_tokens=self.completion_tokens, seconds_to_first=round(self.seconds_to_first, 4),
                       seconds=round(self.seconds, 4))
        return out


@dataclass
class LoadedModel:
    """A generation model (onnxruntime-genai's, or the general route's ``KvModel``) and its tokenizer, opened once
    and used for many requests; ``ends`` are its end-of-text tokens."""

    model: Any
    tokenizer: Any
    context_length: int
    folder: Path
    config: dict[str, Any] = field(default_factory=dict)
    ends: frozenset[int] = frozenset()
    decoder: tuple[Callable[[Any], str], frozenset[int]] | None = None  # ``text_decoder``'s, once asked


def open_model(folder: Path, threads: int = 1) -> LoadedModel:
    """Open the generation model in ``folder`` for the CPU with ``threads`` intra-op threads."""
    from hpcfair.generate.torch_export import CONFIG

    if (folder / CONFIG).is_file():
        from hpcfair.generate.onnx_loop import KvModel, KvTokenizer

        model = KvModel(folder, threads)
        return LoadedModel(model, KvTokenizer(folder), model.context_length, folder, model.config,
                           frozenset(model.ends))
    import onnxruntime_genai as og

    path = folder / "genai_config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        raise CodedError("not_runnable", "The generation model has no readable genai_config.json.") from None
    og_config = og.Config(str(folder))
    og_config.overlay(json.dumps({"model": {"decoder": {"session_options": {
        "intra_op_num_threads": max(1, threads), "inter_op_num_threads": 1}}}}))
    og_config.clear_providers()
    try:
        model = og.Model(og_config)
    except Exception as exc:  # onnxruntime-genai raises RuntimeError with its own words
        said = str(exc).replace(str(folder), "<model>")  # its words, without the host's paths
        raise CodedError("not_runnable", f"onnxruntime-genai could not open the model: {said[:300]}") from None
    found = config["model"].get("eos_token_id")
    ends = frozenset(found if isinstance(found, list) else [found] if isinstance(found, int) else [])
    return LoadedModel(model, og.Tokenizer(model), int(config["model"].get("context_length") or 2048), folder, config,
                       ends)


def start(loaded: LoadedModel, ids, *, max_new_tokens: int, temperature: float = 0.0, top_p: float = 1.0,
          top_k: int = 0, seed: int | None = None, min_new_tokens: int = 0):
    """A generator over ``ids`` (the prompt's tokens, fed once) with ``is_done``, ``generate_next_token`` and
    ``get_next_tokens``: onnxruntime-genai's, or the general route's ``KvGenerator``."""
    import numpy as np

    from hpcfair.generate.onnx_loop import KvGenerator, KvModel, Search

    if isinstance(loaded.model, KvModel):
        return KvGenerator(loaded.model, [int(i) for i in ids], Search(max_new_tokens, temperature, top_p, top_k,
                                                                        seed, min_new_tokens))
    import onnxruntime_genai as og

    params = og.GeneratorParams(loaded.model)
    length = min(loaded.context_length, max(len(ids) + max_new_tokens, window_capacity(loaded.config)))
    options: dict[str, Any] = {"max_length": length, "do_sample": temperature != 0}
    if min_new_tokens:
        options["min_length"] = min(length, len(ids) + min_new_tokens)
    if temperature != 0:
        options.update(temperature=temperature, top_p=top_p, top_k=top_k)
    if seed is not None:
        options["random_seed"] = seed
    params.set_search_options(**options)
    generator = og.Generator(loaded.model, params)
    generator.append_tokens(np.asarray(ids, dtype=np.int32))
    return generator


def window_capacity(config: dict[str, Any]) -> int:
    """The KV cache a build with window-sized caches (Gemma-2/3's local layers, Mistral's window) needs: at
    least its window (and the slack the builder recorded), however short the request; 0 for another build.
    Generation still stops after ``max_new_tokens`` (``generate`` counts them)."""
    window = ((config.get("model") or {}).get("decoder") or {}).get("sliding_window") or {}
    if not isinstance(window, dict) or not window.get("layers"):
        return 0
    return int(window.get("window_size") or 0) + int(window.get("cache_slack") or 0)


def prompt_ids(loaded: LoadedModel, request: GenerateRequest):
    """The prompt's token ids: the text as given, or the messages through the tokenizer's chat template."""
    text = request.prompt
    if request.messages:
        try:
            text = loaded.tokenizer.apply_chat_template(messages=json.dumps(list(request.messages)),
                                                        add_generation_prompt=True)
        except MemoryError:
            raise  # a template that builds huge strings: the engine answers memory_limit
        except Exception as exc:
            raise CodedError("invalid", f"The model's tokenizer has no usable chat template ({str(exc)[:200]}); "
                                        "send a 'prompt' instead of 'messages'.") from None
    return loaded.tokenizer.encode(text)


def generate(loaded: LoadedModel, request: GenerateRequest, *,
             cancelled: Callable[[], bool] = lambda: False, deadline: float | None = None) -> Iterator[Piece]:
    """Generate for ``request`` piece by piece (see the module's docstring). ``cancelled`` is asked between
    tokens; past ``deadline`` (``time.monotonic``) generation ends with ``finish_reason`` ``time``."""
    started = time.monotonic()
    ids = prompt_ids(loaded, request)
    if len(ids) >= loaded.context_length:
        raise CodedError("prompt_too_long", f"The prompt is {len(ids)} tokens; this model's context holds "
                                            f"{loaded.context_length}. Shorten it.")
    generator = start(loaded, ids, max_new_tokens=request.max_new_tokens, temperature=request.temperature,
                      top_p=request.top_p, top_k=request.top_k, seed=request.seed)
    stream = TextStream(*text_decoder(loaded))
    stops = StopWatch(request.stop)
    count, first, reason, ends = 0, 0.0, "length", loaded.ends
    while not generator.is_done() and count < request.max_new_tokens:
        if cancelled() or (deadline is not None and time.monotonic() > deadline):
            reason = "cancelled" if cancelled() else "time"
            break
        generator.generate_next_token()
        token = int(generator.get_next_tokens()[0])
        count += 1
        first = first or time.monotonic() - started
        if token in ends:
            reason = "stop"
            break
        text, hit = stops.feed(stream.decode(token))
        if text:
            yield Piece(text)
        if hit:
            reason = "stop"
            break
    else:
        reason = "length"
    if not stops.met:  # ended by length, time, cancellation or an end token: what the stream and stops hold
        text, hit = stops.feed(stream.rest())
        reason = "stop" if hit else reason  # the held tail completed a stop string
        if rest := text if hit else text + stops.flush():
            yield Piece(rest)
    yield Piece("", done=True, finish_reason=reason, prompt_tokens=len(ids), completion_tokens=count,
                seconds_to_first=first, seconds=time.monotonic() - started)


class TextStream:
    """The answer's text token by token (``decode``) and, when generation ends, what is still held (``rest``):
    ``hpcfair.generate.detokenize.IncrementalText`` over the model's ``text_decoder``, so that the pieces join
    to exactly the tokenizer's decode of the same ids, streamed or not (onnxruntime-genai's own stream drops
    the characters after an incomplete UTF-8 sequence, so it is not used)."""

    def __init__(self, decode: Callable[[Any], str], held: frozenset[int] = frozenset()) -> None:
        from hpcfair.generate.detokenize import IncrementalText

        self.text = IncrementalText(decode, held=held)

    def decode(self, token: int) -> str:
        return self.text.push(token)

    def rest(self) -> str:
        return self.text.rest()


def text_decoder(loaded: LoadedModel) -> tuple[Callable[[Any], str], frozenset[int]]:
    """The decode transformers' tokenizer of the folder does (``tokenizers`` on its ``tokenizer.json``, special
    tokens skipped), and its byte-fallback token ids; onnxruntime-genai's decoder where the folder has no
    ``tokenizer.json`` tokenizers can read."""
    if loaded.decoder is not None:
        return loaded.decoder
    from hpcfair.generate.detokenize import byte_tokens

    fast = None
    if (loaded.folder / "tokenizer.json").is_file():
        try:
            from tokenizers import Tokenizer

            fast = Tokenizer.from_file(str(loaded.folder / "tokenizer.json"))
        except Exception:  # noqa: BLE001 - one tokenizers cannot read: onnxruntime-genai's decode
            fast = None
    if fast is not None:
        def decode(ids) -> str:
            return fast.decode([int(i) for i in ids], skip_special_tokens=True)

        loaded.decoder = decode, byte_tokens(fast.get_vocab())
        return loaded.decoder
    import numpy as np

    def decode_genai(ids) -> str:
        return loaded.tokenizer.decode(np.asarray(list(ids), dtype=np.int32)) if len(ids) else ""

    loaded.decoder = decode_genai, frozenset()
    return loaded.decoder


class StopWatch:
    """Cuts generated text at the first stop string, holding back a tail that might begin one."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.hold = max((len(s) for s in stops), default=1) - 1
        self.pending = ""
        self.met = False

    def feed(self, text: str) -> tuple[str, bool]:
        """The text now safe to send, and whether a stop string was met."""
        self.pending += text
        cuts = [self.pending.find(s) for s in self.stops if s in self.pending]
        if cuts:
            out, self.pending, self.met = self.pending[:min(cuts)], "", True
            return out, True
        keep = min(self.hold, len(self.pending))
        out, self.pending = self.pending[:len(self.pending) - keep], self.pending[len(self.pending) - keep:]
        return out, False

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


def text_of(pieces: Iterator[Piece]) -> tuple[str, Piece]:
    """All of a generation's text and its last piece."""
    parts, last = [], Piece("")
    for piece in pieces:
        parts.append(piece.text)
        last = piece
    return "".join(parts), last
