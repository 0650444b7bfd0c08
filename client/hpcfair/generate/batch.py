"""A file of prompts through a generation model (a hub job's compute, on a Celery worker's sandbox or a Slurm
node): one prompt per line (``.txt``) or one JSON object per line (``.jsonl``: ``prompt`` or ``messages`` and
any of the request's options), each answered in turn into ``generations.jsonl``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcfair.compute.errors import CodedError
from hpcfair.generate.run import GenerateRequest, generate, open_model, text_of

MAX_PROMPTS = 100_000


def read_prompts(path: Path, options: dict[str, Any]) -> list[GenerateRequest]:
    """The file's requests, each with ``options`` under its own; a bad line is named."""
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    if not lines:
        raise CodedError("invalid_inputs", f"{path.name} holds no prompts.")
    if len(lines) > MAX_PROMPTS:
        raise CodedError("invalid_inputs", f"{path.name} has {len(lines):,} prompts; a job takes {MAX_PROMPTS:,}.")
    requests = []
    for number, line in enumerate(lines, 1):
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise CodedError("invalid_inputs", f"line {number} of {path.name} is not JSON ({exc}).") from None
        else:
            item = {"prompt": line}
        try:
            requests.append(_parse(options, item))
        except CodedError as exc:
            raise CodedError("invalid_inputs", f"line {number} of {path.name}: {exc.detail}") from None
    return requests


def _parse(options: dict[str, Any], item: Any) -> GenerateRequest:
    limit = int(options.get("max_tokens_limit", 4096))
    merged = {k: v for k, v in options.items() if k != "max_tokens_limit"}
    return GenerateRequest.parse({**merged, **item} if isinstance(item, dict) else item, max_tokens=limit)


def run_batch(model: Path, prompts: Path, output: Path, options: dict[str, Any], *, threads: int = 1,
              progress: Callable[[int, int], None] = lambda done, total: None) -> dict[str, Any]:
    """Answer every prompt of ``prompts`` with the model in ``model``; write ``output`` (JSON lines); the
    totals."""
    requests = read_prompts(prompts, options)
    loaded = open_model(model, threads)
    started, tokens = time.monotonic(), 0
    with output.open("w", encoding="utf-8") as out:
        for index, request in enumerate(requests):
            try:
                text, last = text_of(generate(loaded, request))
                record = {"index": index, "text": text, "finish_reason": last.finish_reason,
                          "prompt_tokens": last.prompt_tokens, "completion_tokens": last.completion_tokens}
                tokens += last.completion_tokens
            except CodedError as exc:  # one prompt too long does not lose the others
                record = {"index": index, "error": exc.code, "detail": exc.detail}
            out.write(json.dumps(record) + "\n")
            progress(index + 1, len(requests))
    seconds = time.monotonic() - started
    return {"prompts": len(requests), "completion_tokens": tokens, "seconds": round(seconds, 3),
            "tokens_per_second": round(tokens / seconds, 2) if seconds else 0.0}
