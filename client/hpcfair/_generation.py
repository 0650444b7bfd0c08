"""``modelAPI.generate``: text from a language model on the hub (``task: generate``), streamed as it comes.

```yaml
general_args: {task: generate}
model_args:   {model_file: alice/tiny-llama}
task_args:    {prompt: "The hub converts", max_new_tokens: 64, temperature: 0}
out_args:     {export_file: answer.txt}
```

A ``messages`` chat goes through the model's chat template; ``input`` names a file of prompts (one per line,
or one JSON object per line with ``prompt`` or ``messages`` and any option), each generated in turn, and
written to ``export_file`` as JSON lines."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcfair import _sources
from hpcfair.client import HubClient
from hpcfair.config import Config
from hpcfair.errors import HubError

OPTIONS = ("max_new_tokens", "temperature", "top_p", "top_k", "seed", "stop")
BUILT = ("onnx-genai", "onnx-kv")  # the formats of the hub's generation builds (ontology.fields.BUILT_FORMATS)
SUFFIXES = ("genai", "kv", "genai-int8", "genai-int4")  # their labels: <label>-<suffix>


def generation_build(client: HubClient, ref: str) -> dict[str, Any]:
    """The version record of the generation build that answers ``ref`` (itself when it is one): its
    ``<label>-genai`` or ``<label>-kv`` version, resolved online or, offline, from the cache."""
    info = client.resolve(ref)
    if (info.get("metadata") or {}).get("format") in BUILT:
        return info
    for suffix in SUFFIXES:
        try:
            built = client.resolve(f"{info['artifact']}@{info['version']}-{suffix}")
        except HubError as exc:
            if exc.code in ("not_found", "offline"):
                continue
            raise
        if (built.get("metadata") or {}).get("format") in BUILT:
            return built
    if not client.offline:  # the hub says why: the build's job (`hpcfair jobs wait ID`), or why it has none
        ask = client.generate(info["pid"], prompt="x", max_new_tokens=1, temperature=0)
        try:
            next(ask, None)
        except HubError as exc:
            if exc.code in ("not_ready", "not_runnable"):
                raise
        finally:
            ask.close()
    raise HubError(f"{info['artifact']}@{info['version']} has no generation build "
                   + ("in the cache: run it once online with --device local first." if client.offline else
                      "yet: the hub builds one after publishing a causal LM (hpcfair jobs list shows the build)."),
                   code="offline" if client.offline else "not_ready")


def generate_local(client: HubClient, ref: str, request: dict[str, Any],
                   on_text: Callable[[str], None] | None = None, folder: Path | None = None) -> dict[str, Any]:
    """Generate on this machine's CPU (``--device local``) with the generation build of ``ref``, its files
    from the cache (fetched once online): works offline (``HPCFAIR_OFFLINE=1``) on a compute node."""
    from hpcfair.compute.errors import CodedError
    from hpcfair.generate.run import GenerateRequest, open_model
    from hpcfair.generate.run import generate as run

    built = generation_build(client, ref)
    where = folder or client.cache.root / "generation" / built["pid"].replace(":", "_").replace("/", "_")
    client.download(built["pid"], where)
    try:
        asked = GenerateRequest.parse(request)
        loaded = open_model(where, threads=max(1, (os.cpu_count() or 1)))
        parts: list[str] = []
        last: dict[str, Any] = {}
        for piece in run(loaded, asked):
            if piece.done:
                last = {"finish_reason": piece.finish_reason, "prompt_tokens": piece.prompt_tokens,
                        "completion_tokens": piece.completion_tokens}
                continue
            parts.append(piece.text)
            if on_text is not None:
                on_text(piece.text)
    except CodedError as exc:
        raise HubError(exc.detail, code=exc.code) from None
    return {"text": "".join(parts), "version": f"{built['artifact']}@{built['version']}", **last}


def generate(client: HubClient, config: Config, on_text: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the config's prompt (or its file of prompts) on the hub; ``on_text`` gets each piece as it comes.
    Returns ``{"text": …, "finish_reason": …, tokens}`` (for a file: ``{"results": [...]}``)."""
    task = config.task
    sources = _sources.sources(config)
    if len(sources) != 1 or sources[0].ref is None:
        raise config.error(config.where("model_file"), "name one hub model (owner/name[@version] or a PID); "
                                                       "generation runs on the hub")
    options = {key: getattr(task, key) for key in OPTIONS if getattr(task, key) is not None}
    exports = config.names("export_file")
    export = config.path(exports[0]) if exports else None
    if task.input:
        if task.prompt is not None or task.messages is not None:
            raise config.error(config.where("input"), "give prompts in a file (input) or one prompt, not both")
        results = [_one(client, sources[0].ref, {**options, **request}, on_text) for request in _prompts(config)]
        if export is not None:
            export.write_text("".join(json.dumps(result) + "\n" for result in results))
        return {"results": results}
    if (task.prompt is None) == (task.messages is None):
        raise config.error(config.where("prompt"), "give a prompt, or messages (a chat), or an input file")
    asked = {"prompt": task.prompt} if task.prompt is not None else {"messages": task.messages}
    result = _one(client, sources[0].ref, {**options, **asked}, on_text)
    if export is not None:
        export.write_text(result["text"])
    return result


def _one(client: HubClient, ref: str, request: dict[str, Any], on_text: Callable[[str], None] | None
         ) -> dict[str, Any]:
    parts: list[str] = []
    last: dict[str, Any] = {}
    prompt, messages = request.pop("prompt", None), request.pop("messages", None)
    for piece in client.generate(ref, prompt=prompt, messages=messages, **request):
        if piece.get("done"):
            last = piece
            continue
        parts.append(piece["text"])
        if on_text is not None:
            on_text(piece["text"])
    return {"text": "".join(parts), **{k: v for k, v in last.items() if k != "done"}}


def _prompts(config: Config) -> list[dict[str, Any]]:
    """The file of prompts: a line each (.txt), or a JSON object each (.jsonl)."""
    path = config.path(config.task.input)
    if not path.is_file():
        raise config.error(config.where("input"), f"no file {path}")
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return [{"prompt": line} for line in lines]
    out = []
    for number, line in enumerate(lines, 1):
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise config.error(config.where("input"), f"line {number} of {path.name} is not JSON ({exc})") from None
        if not isinstance(item, dict) or not ({"prompt", "messages"} & set(item)):
            raise config.error(config.where("input"), f"line {number} of {path.name} has no prompt or messages")
        out.append(item)
    return out
