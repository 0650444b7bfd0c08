"""Run a generation model of the general route (``hpcfair.generate.torch_export``: ``kv_config.json``,
``decoder.onnx`` and for an encoder-decoder ``encoder.onnx``) on plain ONNX Runtime, with the same surface as
onnxruntime-genai's generator so that ``hpcfair.generate.run.generate`` drives both: the prompt once, then one
token a step, the past keys and values carried from step to step (nothing is recomputed for earlier tokens).

Greedy decoding, or sampling with temperature, top-k and top-p from a seeded generator. The tokenizer is the
folder's ``tokenizer.json`` (the ``tokenizers`` library) and its chat template is rendered in Jinja's sandbox,
as transformers does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.compute.errors import CodedError
from hpcfair.generate.torch_export import CONFIG, ENCODER_DECODER


class KvModel:
    """The graphs of a general-route folder, opened once for many generations."""

    def __init__(self, folder: Path, threads: int = 1) -> None:
        import onnxruntime as ort

        try:
            self.config: dict[str, Any] = json.loads((folder / CONFIG).read_text())
        except (OSError, ValueError):
            raise CodedError("not_runnable", f"The generation model has no readable {CONFIG}.") from None
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = max(1, threads), 1

        def session(name: Any):
            # Only a file of the model's own folder, by its plain name: never a path of the host.
            if not isinstance(name, str) or Path(name).name != name or not (folder / name).is_file():
                raise CodedError("not_runnable", f"{CONFIG} names a graph that is not a file of the model.")
            try:
                return ort.InferenceSession(str(folder / name), options, providers=["CPUExecutionProvider"])
            except Exception:  # noqa: BLE001 - its words may name the host's paths
                raise CodedError("not_runnable", f"ONNX Runtime could not open the model's {name}.") from None

        self.decoder = session(self.config["decoder"]["file"])
        self.encoder = session(self.config["encoder"]["file"]) if self.config["kind"] == ENCODER_DECODER else None
        self.inputs = {value.name for value in self.decoder.get_inputs()}
        self.layers: list[dict[str, list[int]]] = self.config["decoder"]["layers"]
        self.context_length = int(self.config.get("context_length") or 1024)
        self.ends = set(self.config.get("eos_token_ids") or [])

    def empty_past(self) -> dict[str, np.ndarray]:
        return {f"past.{i}.{part}": np.zeros((1, layer[part][0], 0, layer[part][1]), np.float32)
                for i, layer in enumerate(self.layers) for part in ("key", "value")}


@dataclass(frozen=True)
class Search:
    """How the next token is chosen: greedy when ``temperature`` is 0."""

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    min_new_tokens: int = 0


class KvGenerator:
    """One generation: ``is_done``, ``generate_next_token`` and ``get_next_tokens`` as onnxruntime-genai's
    ``Generator`` has them (and ``logits``, the last step's scores)."""

    def __init__(self, model: KvModel, ids: list[int], search: Search) -> None:
        self.model, self.search = model, search
        self.random = np.random.default_rng(search.seed)
        self.past = model.empty_past()
        self.count, self.token, self.finished = 0, -1, False
        self.prompt = [int(i) for i in ids]
        if model.encoder is not None:
            source = np.asarray([self.prompt], np.int64)
            self.mask = np.ones_like(source)
            encoded = model.encoder.run(None, {"input_ids": source, "attention_mask": self.mask})
            self.states = encoded[0]  # the cross-attention keys and values, projected once for every step:
            self.cross = {output.name: value for output, value in zip(model.encoder.get_outputs()[1:], encoded[1:],
                                                                      strict=True)}
            start = model.config.get("decoder_start_token_id")
            self.pending = [int(start if start is not None else model.config.get("pad_token_id") or 0)]
            self.limit = min(search.max_new_tokens, model.context_length - 1)
        else:
            self.pending, self.seen = list(self.prompt), 0
            self.limit = min(search.max_new_tokens, model.context_length - len(self.prompt))
        self.logits = np.zeros(0, np.float32)

    def is_done(self) -> bool:
        return self.finished or self.count >= self.limit

    def generate_next_token(self) -> None:
        model = self.model
        new = np.asarray([self.pending], np.int64)
        if model.encoder is not None:
            feeds = {"decoder_input_ids": new, "encoder_hidden_states": self.states,
                     "encoder_attention_mask": self.mask, **self.cross}
        else:
            total = self.seen + len(self.pending)
            feeds = {"input_ids": new, "attention_mask": np.ones((1, total), np.int64),
                     "position_ids": np.arange(self.seen, total, dtype=np.int64)[None]}
            self.seen = total
        feeds = {name: value for name, value in {**feeds, **self.past}.items() if name in model.inputs}
        outputs = model.decoder.run(None, feeds)
        self.logits = outputs[0][0, -1].astype(np.float64)
        self.past = {name: value for name, value in zip(self.past, outputs[1:], strict=True)}
        self.token = self.choose(self.logits)
        self.pending = [self.token]
        self.count += 1
        self.finished = self.token in model.ends and self.count > self.search.min_new_tokens

    def get_next_tokens(self) -> list[int]:
        return [self.token]

    def choose(self, logits: np.ndarray) -> int:
        """The next token from the last position's ``logits``: forced, suppressed, greedy or sampled."""
        config, search = self.model.config, self.search
        forced = config.get("forced_bos_token_id")
        if self.count == 0 and forced is not None:
            return int(forced)
        logits = logits.copy()
        banned = list(config.get("suppress_token_ids") or [])
        if self.count < search.min_new_tokens:
            banned += list(self.model.ends)
        if banned:
            logits[banned] = -np.inf
        if search.temperature == 0:
            return int(np.argmax(logits))
        return sample(logits / search.temperature, search.top_k, search.top_p, self.random)


def sample(scores: np.ndarray, top_k: int, top_p: float, random: np.random.Generator) -> int:
    """A token drawn from softmax(``scores``) restricted to the ``top_k`` best (0: all), then to the smallest
    set of best tokens whose probability reaches ``top_p``."""
    order = np.argsort(-scores, kind="stable")
    if top_k:
        order = order[:top_k]
    kept = scores[order]
    probabilities = np.exp(kept - kept[0])
    probabilities /= probabilities.sum()
    if top_p < 1.0:
        cut = int(np.searchsorted(np.cumsum(probabilities), top_p)) + 1
        order, probabilities = order[:cut], probabilities[:cut] / probabilities[:cut].sum()
    return int(order[random.choice(len(order), p=probabilities)])


class KvTokenizer:
    """The folder's fast tokenizer with the surface ``run.generate`` uses: ``encode``, ``create_stream`` and
    ``apply_chat_template``."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        try:
            self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:  # noqa: BLE001
            raise CodedError("not_runnable", f"{folder.name}/tokenizer.json could not be read ({exc}).") from None
        try:
            self.settings = json.loads((folder / "tokenizer_config.json").read_text())
        except (OSError, ValueError):
            self.settings = {}
        template = folder / "chat_template.jinja"
        self.template = template.read_text() if template.is_file() else self.settings.get("chat_template")

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` with the tokenizer's special tokens, as ``tokenizer(text)`` gives them."""
        return self.tokenizer.encode(text).ids

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def create_stream(self) -> TokenStream:
        return TokenStream(self)

    def apply_chat_template(self, messages: str, add_generation_prompt: bool = True) -> str:
        """The chat ``messages`` (JSON, as onnxruntime-genai takes them) through the tokenizer's template."""
        if not isinstance(self.template, str) or not self.template:
            raise ValueError("the tokenizer has no chat template")
        from hpcfair.generate.template import render_chat

        def token(name: str) -> str:
            value = self.settings.get(name)
            return str(value.get("content", "")) if isinstance(value, dict) else str(value or "")

        return render_chat(self.template, json.loads(messages), add_generation_prompt=add_generation_prompt,
                           bos_token=token("bos_token"), eos_token=token("eos_token"))


class TokenStream:
    """Text of one token at a time (``decode``), as ``hpcfair.generate.detokenize.IncrementalText`` gives it."""

    def __init__(self, tokenizer: KvTokenizer) -> None:
        from hpcfair.generate.detokenize import IncrementalText, byte_tokens

        self.text = IncrementalText(tokenizer.decode, held=byte_tokens(tokenizer.tokenizer.get_vocab()))

    def decode(self, token: int) -> str:
        return self.text.push(token)
