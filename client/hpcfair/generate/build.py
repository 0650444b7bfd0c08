"""Build a generation model from a Hugging Face language model folder, and verify it: greedy decoding from the
ONNX model gives the same tokens as transformers' ``generate`` in PyTorch. The families onnxruntime-genai's
model builder exports go through it (its generator is the fastest runner here); any other causal LM and the
text encoder-decoders take the general route (``torch_export``: transformers' model exported with its KV
cache, run by ``onnx_loop``). Runs in the conversion sandbox (a ``pytorch_model.bin`` is a pickle).

Quality of a smaller copy (``int8``, ``int4``) is measured, not assumed: its perplexity on ``SAMPLE_TEXT`` against
the full-precision model's, and tokens per second of each. An ``int8`` copy is also checked by the fp32 build's
greedy tokens against transformers (all ``VERIFY_TOKENS`` of each prompt); 4-bit weights change greedy choices
(a random model's from the first token), so ``int4`` is compared by perplexity alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from hpcfair.compute.errors import CodedError
from hpcfair.generate.families import (
    ENCODER_DECODER,
    GENAI,
    GENAI_ARCHITECTURES,
    architecture_of,
    precision_problem,
    read_config,
    route_of,
)
from hpcfair.generate.run import GenerateRequest, generate, open_model, start, text_of

TOKEN_CHECKED = ("fp32", "int8")  # the precisions verified by greedy tokens; the others by perplexity
# A reduced copy's greedy tokens may part from transformers' at a near tie: int8 weights moved the tiny test
# Llama's logits by at most 0.9% of a step's spread (int4's by 9%, too much for a token check to mean anything)
TIES = {"int8": 0.02}
PROMPTS = ("The model", "Scientists share data so that", "1, 2, 3,")
VERIFY_TOKENS = 16
SAMPLE_TEXT = (Path(__file__).with_name("sample.txt"))
Stage = Callable[[float, str], None]


def build(source: Path, output: Path, *, precision: str = "fp32", stage: Stage = lambda f, w: None,
          threads: int = 1) -> dict[str, Any]:
    """Build ``output`` (model.onnx, its weights, genai_config.json, tokenizer) from the folder ``source`` and
    verify it; the report says what was built and how it compares."""
    config = read_config(source)
    architecture, route = architecture_of(config), route_of(config)
    if not route:
        raise CodedError("unsupported_model", f"{architecture or 'This model'} has no generation build here: the hub "
                                              "builds causal language models (…ForCausalLM, …LMHeadModel) and text "
                                              "encoder-decoders (…ForConditionalGeneration: T5, BART, Marian…).")
    if not (source / "tokenizer.json").is_file():
        raise CodedError("unsupported_model", "The folder has no tokenizer.json (a fast tokenizer), which "
                                              "generation needs: save it with tokenizer.save_pretrained(folder).")
    if problem := precision_problem(precision, route):
        raise CodedError(*problem)
    stage(0.1, f"building the {precision} generation model ({architecture})")
    started = time.monotonic()
    if route == GENAI:
        staged = windowed_source(source, output)
        try:
            run_builder(staged, output, precision)
            drop_empty_window(output)
        finally:
            if staged != source:
                shutil.rmtree(staged, ignore_errors=True)
        family, builder, context = GENAI_ARCHITECTURES[architecture], \
            f"onnxruntime-genai {_version('onnxruntime_genai')}", _context(output)
    else:
        from hpcfair.generate import torch_export

        written = torch_export.export(source, output, route)
        family, builder, context = str(config.get("model_type") or route), \
            f"{torch_export.ROUTE} (torch {_version('torch')}, transformers {_version('transformers')})", \
            written["context_length"]
    seconds = time.monotonic() - started
    stage(0.7, "verifying greedy decoding against transformers")
    report: dict[str, Any] = {
        "architecture": architecture, "family": family, "route": "onnx-genai" if route == GENAI else "onnx-kv",
        "kind": ENCODER_DECODER if route == ENCODER_DECODER else "decoder", "precision": precision,
        "builder": builder, "build_seconds": round(seconds, 2),
        "files": sorted(p.name for p in output.iterdir() if p.is_file()),
        "size_bytes": sum(p.stat().st_size for p in output.iterdir() if p.is_file()),
        "context_length": context}
    report["verification"] = verify_tokens(source, output, threads=threads, tie=TIES.get(precision, 0.0)) \
        if precision in TOKEN_CHECKED else \
        {"method": "perplexity", "passed": True, "note": "a reduced-precision copy is compared by perplexity"}
    return report


def windowed_source(source: Path, output: Path) -> Path:
    """``source``, or beside ``output`` a copy of it (files linked, not copied) whose config names each layer's
    attention as transformers runs it, for onnxruntime-genai's builder, which reads ``layer_types`` only: a
    ``sliding_window`` without ``layer_types`` is a window on every layer (Mistral, Mixtral, Phi-3; the builder
    built full attention with a window-sized cache); a window no shorter than the context is full attention
    (Mistral's default 4096 on a shorter model; the builder's window-sized cache could not hold it)."""
    config = read_config(source)
    window, layers = config.get("sliding_window"), config.get("num_hidden_layers")
    context = config.get("max_position_embeddings")
    if not isinstance(window, int) or window <= 0 or not isinstance(layers, int):
        return source
    if isinstance(context, int) and window >= context:
        types = ["full_attention"] * layers
    elif config.get("layer_types"):
        return source
    else:
        types = ["sliding_attention"] * layers
    if config.get("layer_types") == types:
        return source
    staged = output.parent / f".{output.name}-source"
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    for path in source.iterdir():
        if path.name != "config.json":
            (staged / path.name).symlink_to(path.resolve(), target_is_directory=path.is_dir())
    (staged / "config.json").write_text(json.dumps({**config, "layer_types": types}))
    return staged


def drop_empty_window(output: Path) -> None:
    """A build with no window-sized layer keeps no ``sliding_window`` entry: with one, the runtime sizes its
    caches for a window no layer has (the attention then fails on a longer prompt)."""
    path = output / "genai_config.json"
    config = json.loads(path.read_text())
    decoder = config.get("model", {}).get("decoder", {})
    if isinstance(decoder.get("sliding_window"), dict) and not decoder["sliding_window"].get("layers"):
        del decoder["sliding_window"]
        path.write_text(json.dumps(config, indent=4))


def run_builder(source: Path, output: Path, precision: str) -> None:
    """onnxruntime-genai's builder, as its own command (its module changes ``sys.path``)."""
    output.mkdir(parents=True, exist_ok=True)
    cache = output.parent / f".{output.name}-cache"
    argv = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(source), "-o", str(output),
            "-p", precision, "-e", "cpu", "-c", str(cache)]
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    shutil.rmtree(cache, ignore_errors=True)
    if done.returncode != 0 or not (output / "genai_config.json").is_file():
        if any(sign in done.stderr for sign in ("MemoryError", "bad_alloc", "Cannot allocate memory")):
            raise CodedError("memory_limit", "onnxruntime-genai's builder ran out of memory: raise the build's "
                                             "memory limit (memory_mb, or HUB_CONVERT_MEMORY_MB on the hub).")
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise CodedError("conversion_failed", "onnxruntime-genai's builder failed: "
                                              f"{lines[-1][:400] if lines else f'status {done.returncode}'}")


def verify_tokens(source: Path, built: Path, *, threads: int = 1, tokens: int = VERIFY_TOKENS,
                  tie: float = 0.0, runner: Runner | None = None) -> dict[str, Any]:
    """Greedy decoding of ``PROMPTS`` by transformers (PyTorch, fp32) and by the built model: the first
    ``tokens`` new tokens must be the same (and for the general route, the built tokenizer's ids too). With
    ``tie``, a prompt may part at a near tie: where transformers' logits for its token and the built model's
    differ by at most ``tie`` times that step's logit spread (max - min), which reduced weights may flip.
    ``runner``: another engine's greedy ids and tokenizer (llama.cpp's, for a GGUF build) instead of the
    ONNX build in ``built``."""
    import torch
    import transformers
    from transformers import AutoTokenizer

    torch.set_num_threads(max(1, threads))
    route = route_of(read_config(source))
    loader = transformers.AutoModelForSeq2SeqLM if route == ENCODER_DECODER else transformers.AutoModelForCausalLM
    tokenizer = AutoTokenizer.from_pretrained(source)
    reference = loader.from_pretrained(source, dtype=torch.float32).eval()
    loaded = open_model(built, threads) if runner is None else None
    options = _reference_options(loaded, tokenizer, tokens) if route != GENAI and loaded is not None else {
        "max_new_tokens": tokens, "do_sample": False, "min_new_tokens": tokens, "pad_token_id": tokenizer.eos_token_id}
    if runner is None:
        runner = Runner(lambda ids, n: greedy_ids(loaded, ids, n), loaded.tokenizer.encode if route != GENAI else None)
    cases, passed = [], True
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            out = reference.generate(ids, **options, output_scores=True, return_dict_in_generate=True)
        sequence = out.sequences[0]
        expected = sequence[1:].tolist() if route == ENCODER_DECODER else sequence[ids.shape[1]:].tolist()
        got = runner.greedy([int(i) for i in ids[0]], tokens)
        same = _common_prefix(expected, got)
        case: dict[str, Any] = {"prompt": prompt, "tokens": tokens, "matched": same}
        if same < min(len(expected), tokens) and tie and same < len(got):
            step = out.scores[same][0].float()
            finite = step[torch.isfinite(step)]
            gap = float(step[expected[same]] - step[got[same]]) / max(float(finite.max() - finite.min()), 1e-12)
            case["parted_at_gap"] = round(gap, 5)  # of the step's logit spread
            case["near_tie"] = gap <= tie
        passed &= same == min(len(expected), tokens) or bool(case.get("near_tie"))
        if runner.encode is not None:
            case["tokenizer_matches"] = list(runner.encode(prompt)) == [int(i) for i in ids[0]]
            passed &= case["tokenizer_matches"]
        cases.append(case)
    method = "greedy tokens against transformers generate" + (f", parting at near ties (<= {tie:g} of the "
                                                               "logit spread)" if tie else "")
    return {"method": method, "passed": passed, "prompts": cases}


class Runner(NamedTuple):
    """What ``verify_tokens`` asks of a built model: ``greedy(ids, n)``, the next ``n`` greedy ids after ``ids``
    (the end token does not stop it), and ``encode(text)``, its tokenizer's ids (None: not checked)."""
    greedy: Callable[[list[int], int], list[int]]
    encode: Callable[[str], Sequence[int]] | None


def _reference_options(loaded, tokenizer, tokens: int) -> dict[str, Any]:
    """transformers' ``generate`` doing what the general route's loop does (greedy, one beam, the model's end,
    forced-first and suppressed tokens; no repetition rules a folder's generation_config may add)."""
    from transformers import GenerationConfig

    config = loaded.config
    ends = list(loaded.ends)
    pad = config.get("pad_token_id")
    settings = GenerationConfig(max_new_tokens=tokens, min_new_tokens=tokens, num_beams=1, do_sample=False,
                                eos_token_id=ends or None,
                                pad_token_id=pad if pad is not None else (ends[0] if ends else tokenizer.eos_token_id),
                                decoder_start_token_id=config.get("decoder_start_token_id"),
                                forced_bos_token_id=config.get("forced_bos_token_id"),
                                bad_words_ids=[[t] for t in config.get("suppress_token_ids") or []] or None)
    return {"generation_config": settings}


def greedy_ids(loaded, ids: list[int], tokens: int) -> list[int]:
    """The next ``tokens`` greedy token ids after ``ids`` (the end token does not stop it)."""
    generator = start(loaded, ids, max_new_tokens=tokens, min_new_tokens=tokens)
    out: list[int] = []
    while not generator.is_done() and len(out) < tokens:
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
    return out


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def perplexity(built: Path, text: str, *, threads: int = 1, limit: int = 256) -> float:
    """Perplexity of the model in ``built`` on ``text`` (at most ``limit`` tokens), token by token through
    the KV cache."""
    loaded = open_model(built, threads)
    ids = [int(i) for i in loaded.tokenizer.encode(text)][:min(limit, loaded.context_length - 1)]
    import onnxruntime_genai as og

    params = og.GeneratorParams(loaded.model)
    params.set_search_options(max_length=len(ids) + 1, do_sample=False)
    generator = og.Generator(loaded.model, params)
    nll = 0.0
    for position in range(len(ids) - 1):
        generator.append_tokens(np.asarray([ids[position]], dtype=np.int32))
        logits = np.asarray(generator.get_logits(), dtype=np.float64).reshape(-1)
        top = logits.max()
        nll += top + np.log(np.exp(logits - top).sum()) - logits[ids[position + 1]]
    return float(np.exp(nll / max(1, len(ids) - 1)))


def tokens_per_second(built: Path, *, threads: int = 1, tokens: int = 32) -> float:
    """Greedy decoding speed of the model in ``built`` on the first of ``PROMPTS``."""
    loaded = open_model(built, threads)
    _, last = text_of(generate(loaded, GenerateRequest(prompt=PROMPTS[0], max_new_tokens=tokens, temperature=0)))
    return last.completion_tokens / max(last.seconds - last.seconds_to_first, 1e-9) if last.completion_tokens > 1 \
        else 0.0


def compare(full: Path, small: Path, *, threads: int = 1) -> dict[str, Any]:
    """A smaller copy against the full-precision model: size, tokens per second and perplexity."""
    text = SAMPLE_TEXT.read_text()

    def size(folder: Path) -> int:
        return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())

    result = {"size_bytes": size(small), "full_size_bytes": size(full),
              "perplexity": perplexity(small, text, threads=threads),
              "full_perplexity": perplexity(full, text, threads=threads),
              "tokens_per_second": tokens_per_second(small, threads=threads),
              "full_tokens_per_second": tokens_per_second(full, threads=threads)}
    result["size_ratio"] = result["size_bytes"] / result["full_size_bytes"]
    return result


def _context(folder: Path) -> int:
    import json

    return int(json.loads((folder / "genai_config.json").read_text())["model"].get("context_length") or 0)


def _version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module.replace("_", "-"))
    except PackageNotFoundError:
        return "unknown"
