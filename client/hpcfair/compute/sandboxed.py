"""Conversions, verifications, optimisations and fine-tunes in the conversion sandbox, as every executor runs
them: a Celery worker (``hub.conversions.jobs``, ``hub.finetune.jobs``) and a Slurm node
(``hpcfair.slurm_runner``) call the same functions, so a file that fails fails with the same code and words.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcfair.compute.errors import CodedError
from hpcfair.convert import ConversionError, Limits, convert_file, sandbox
from hpcfair.finetune.errors import training_words

Say = Callable[[str], None]


def convert_plan(work: Path, plan: dict[str, Any], limits: Limits, hide: list[Path],
                 on_line: Callable[[str, int], Say] | None = None,
                 on_file: Callable[[int, int], None] | None = None) -> dict[str, dict[str, Any]]:
    """Convert (or verify) each file of ``plan`` (``hub.conversions.jobs.conversion_plan``: paths relative
    to ``work``) in the sandbox; returns the reports by ONNX file name. ``on_line(path, index)`` gives the
    log function of a file's lines; ``on_file(done, count)`` is called after each file. An error's message
    starts with the file's path in the version."""
    reports = {}
    count = len(plan["files"])
    for index, item in enumerate(plan["files"]):
        shown = item.get("label") or item["path"]  # a Hugging Face folder by its folder, not its config.json
        try:
            reports[item["onnx"]] = convert_file(
                work / item["local"], work / item["out"], **plan["options"],
                sample_inputs=work / plan["sample"] if plan["sample"] else None, limits=limits, hide=hide,
                on_line=on_line(shown, index) if on_line else None)
        except ConversionError as exc:  # the detail names the file; the version's path says where it is
            detail = exc.detail if exc.detail.startswith(f"{shown}: ") else f"{shown}: {exc.detail}"
            local_name = Path(item["local"]).name
            raise CodedError(exc.code, detail.replace(f"{shown}: {local_name}: ", f"{shown}: ", 1))
        if on_file is not None:
            on_file(index + 1, count)
    return reports


def run_request(request: dict[str, Any], work: Path, limits: Limits, hide: list[Path],
                on_line: Say | None = None) -> dict[str, Any]:
    """A request to the sandbox's child (an optimisation, a fine-tune) in ``work``; a fine-tune's failure is
    said in training's words."""
    try:
        return sandbox.run(request, work, limits, hide=hide, on_line=on_line)
    except ConversionError as exc:
        training = request.get("task") == "finetune"
        raise CodedError(exc.code, training_words(exc.detail) if training else exc.detail)
