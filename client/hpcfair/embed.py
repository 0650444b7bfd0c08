"""Sentence embeddings from a text encoder's ONNX folder (``model.onnx`` beside ``tokenizer.json``), as
sentence-transformers computes them: the tokenizer without its own padding or truncation, the encoder, then
the pooling of ``1_Pooling/config.json`` and the normalisation ``modules.json`` names, unless the graph holds
them already (the hub's conversion of a sentence-transformers folder outputs ``sentence_embedding``). A plain
encoder (no ``modules.json``) is mean-pooled, as sentence-transformers loads one. Nothing here imports Django:
the hub's generation engine runs it in its bounded child."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.compute import CodedError

POOLED = "sentence_embedding"  # the hub's conversion of a sentence-transformers folder: pooled in the graph
HIDDEN = "last_hidden_state"  # a base encoder's token vectors
TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max", "pooling_mode_lasttoken": "lasttoken",
         "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len", "pooling_mode_mean_tokens": "mean"}
BATCH = 32  # inputs per run, sorted by length as sentence-transformers does: bounded padding and memory
JSON_BYTES = 1 << 20  # a config file larger than this is not read


def _json(path: Path) -> Any:
    try:
        if path.stat().st_size > JSON_BYTES:
            return None
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def pooling_of(folder: Path) -> tuple[str, bool]:
    """(cls|max|mean|mean_sqrt_len|lasttoken, normalise) as the folder's sentence-transformers files say;
    ("mean", False) for a plain encoder."""
    modules = _json(folder / "modules.json")
    modules = [m for m in modules if isinstance(m, dict)] if isinstance(modules, list) else []
    types = [str(m.get("type", "")) for m in modules]
    pooling = next((m for m in modules if str(m.get("type", "")).endswith("Pooling")), None)
    settings = _json(folder / str(pooling.get("path") or "1_Pooling") / "config.json") if pooling else None
    settings = settings if isinstance(settings, dict) else {}
    chosen = [mode for key, mode in MODES.items() if settings.get(key)]
    if len(chosen) > 1:
        raise CodedError("not_runnable", f"1_Pooling/config.json asks for {' and '.join(chosen)} pooling at once; "
                                         "the hub pools one way (one pooling_mode_… true).")
    unknown = [k for k, v in settings.items() if k.startswith("pooling_mode_") and v and k not in MODES]
    if unknown:
        raise CodedError("not_runnable", f"1_Pooling/config.json asks for {unknown[0][:60]}, which the hub does not "
                                         "offer (cls, mean, max, mean_sqrt_len_tokens, lasttoken).")
    return (chosen[0] if chosen else "mean"), any(t.endswith("Normalize") for t in types)


def pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """Token vectors ``hidden`` (batch, sequence, width) pooled over ``mask``'s tokens, as
    sentence-transformers' ``Pooling`` does."""
    weights = mask[..., None].astype(hidden.dtype)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "max":
        return np.where(weights > 0, hidden, np.finfo(hidden.dtype).min).max(axis=1)
    if mode == "lasttoken":
        last = mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)  # right padding: the last kept token
        return hidden[np.arange(len(hidden)), last]
    total, count = (hidden * weights).sum(axis=1), np.clip(weights.sum(axis=1), 1e-9, None)
    return total / (np.sqrt(count) if mode == "mean_sqrt_len" else count)


@dataclass
class Encoder:
    """An open text encoder: its session, tokenizer, pooling and the longest input it takes."""

    session: Any
    tokenizer: Any
    inputs: tuple[str, ...]
    output: str
    mode: str
    normalise: bool
    max_length: int
    vocabulary: int
    width: int | None

    def tokens(self, item: str | list[int]) -> list[int]:
        """``item``'s token ids (a text tokenized with its special tokens, or ids given), checked."""
        ids = self.tokenizer.encode(item).ids if isinstance(item, str) else item
        if len(ids) > self.max_length:
            raise CodedError("prompt_too_long", f"An input has {len(ids)} tokens; this model takes at most "
                                                f"{self.max_length} (sentence_bert_config.json's max_seq_length, "
                                                "else its config's max_position_embeddings). Split the text.")
        if not ids:
            raise CodedError("invalid", "An input has no tokens; send text, or a list of token ids.")
        if min(ids) < 0 or max(ids) >= self.vocabulary:
            raise CodedError("invalid", f"A token id lies outside this model's vocabulary (0 to "
                                        f"{self.vocabulary - 1}).")
        return ids

    def embed(self, items: list[str | list[int]], max_tokens: int) -> tuple[np.ndarray, int]:
        """The float32 embeddings of ``items`` (one row each, in order) and how many tokens they held,
        refused (``request_too_large``) past ``max_tokens`` tokens in all."""
        ids = [self.tokens(item) for item in items]
        count = sum(map(len, ids))
        if count > max_tokens:
            raise CodedError("request_too_large", f"The inputs hold {count} tokens; one request may embed at most "
                                                  f"{max_tokens} (HUB_EMBED_MAX_TOKENS). Send fewer or shorter "
                                                  "inputs per request.")
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        rows: list[np.ndarray] = [np.empty(0)] * len(ids)
        for start in range(0, len(order), BATCH):
            chosen = order[start:start + BATCH]
            for index, vector in zip(chosen, self._run([ids[i] for i in chosen]), strict=True):
                rows[index] = vector
        return np.stack(rows).astype(np.float32), count

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        length = max(map(len, batch))
        tokens = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros_like(tokens)
        for row, ids in enumerate(batch):
            tokens[row, :len(ids)], mask[row, :len(ids)] = ids, 1
        feeds = {"input_ids": tokens, "attention_mask": mask, "token_type_ids": np.zeros_like(tokens)}
        (out,) = self.session.run([self.output], {name: feeds[name] for name in self.inputs})
        vectors = out if self.output == POOLED else pool(out, mask, self.mode)
        if self.normalise and self.output != POOLED:
            vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def open_encoder(folder: Path, onnx: str, threads: int = 1) -> Encoder:
    """The text encoder ``onnx`` (a path in ``folder``) with the tokenizer and sentence-transformers files of its
    folder; refused (``not_runnable``) when it is not one."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    path = folder / onnx
    home = path.parent
    try:
        tokenizer = Tokenizer.from_file(str(home / "tokenizer.json"))
    except Exception:  # noqa: BLE001 - the tokenizer's own words may name this host's paths
        raise CodedError("not_runnable", "The encoder's tokenizer.json could not be read.") from None
    tokenizer.no_padding()  # sentence-transformers pads each batch itself and truncates at max_seq_length
    tokenizer.no_truncation()
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = max(1, threads), 1
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001
        raise CodedError("model_load_failed", "ONNX Runtime could not open the encoder.") from None
    names = tuple(i.name for i in session.get_inputs())
    outputs = {o.name: o for o in session.get_outputs()}
    if "input_ids" not in names or set(names) - set(TEXT_INPUTS) or not {POOLED, HIDDEN} & set(outputs):
        raise CodedError("not_runnable", "The model is not a text encoder: /v1/embeddings takes an ONNX model "
                                         f"with inputs among {', '.join(TEXT_INPUTS)} and an output "
                                         f"{POOLED} or {HIDDEN} (a converted sentence-transformers or encoder "
                                         "folder).")
    output = POOLED if POOLED in outputs else HIDDEN
    mode, normalise = pooling_of(home)
    config = _json(home / "config.json")
    config = config if isinstance(config, dict) else {}
    sentence = _json(home / "sentence_bert_config.json")
    limits = [sentence.get("max_seq_length") if isinstance(sentence, dict) else None,
              config.get("max_position_embeddings"), 512]
    max_length = next(_count(v) for v in limits if _count(v))
    width = outputs[output].shape[-1]
    return Encoder(session, tokenizer, names, output, mode, normalise, max_length,
                   _count(config.get("vocab_size")) or tokenizer.get_vocab_size(),
                   width if isinstance(width, int) else None)
