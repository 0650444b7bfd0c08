"""The type and range of every option ``/infer`` and ``/collaborate`` take, checked once for both paths.

Options come from the query string (always text) and from a JSON body (any JSON value). Both the full
Django path and the express path (``hub.gateway.express``) read requests through
``hub.gateway.api.views.parse_body``, which calls ``check``: so an option of the wrong type (``mode: {}``,
``threads: 2.7``, ``output_format: [null, null]``) is the same coded 400 on both, never a 500 and never
silently taken as the default.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from hub.errors import HubError
from hub.gateway import tensors

DEVICES = ("cpu", "gpu")
MODES = ("auto", "sync", "async")
IF_NO_WORKER = ("refuse", "queue")
VISIBILITIES = ("public", "private")

# name -> the allowed words (a tuple), or the type: "text", "whole", "names", "flag", "list", "links"
SPEC: dict[str, tuple[str, ...] | str] = {
    "device": DEVICES, "mode": MODES, "if_no_worker": IF_NO_WORKER, "output_format": tuple(tensors.FORMATS),
    "threads": "whole", "worker_num": "whole", "batch_size": "whole",
    "outputs": "names", "file": "text", "dataset": "text", "dataset_file": "text",
    # /collaborate
    "models": "list", "links": "list", "merge": "flag", "name": "text", "title": "text", "license": "text",
    "task": "text", "visibility": VISIBILITIES,
}
RANGES: dict[str, tuple[int, int]] = {"batch_size": (1, 1_000_000)}
_FLAGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def max_threads() -> int:
    return settings.HUB_INFER_MAX_THREADS


def check(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with each value of its option's type (query text converted); a 400 naming the first wrong
    one. ``null`` is the same as leaving the option out."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        if value is None:
            continue
        kind = SPEC.get(name)
        if kind is None:
            out[name] = value  # "inputs" and the like: checked where they are read
            continue
        out[name] = _one(name, value, kind)
    return out


def _one(name: str, value: Any, kind: tuple[str, ...] | str) -> Any:
    if isinstance(kind, tuple):
        if not isinstance(value, str) or value not in kind:
            raise _wrong(name, f"{name} is one of {', '.join(kind)}, not {_show(value)}.", "Unknown value.")
        return value
    if kind == "text":
        if not isinstance(value, str) or len(value) > 1000:
            raise _wrong(name, f"{name} is text (up to 1000 characters), not {_show(value)}.", "Expected text.")
        return value
    if kind == "whole":
        return _whole(name, value)
    if kind == "flag":
        flag = _FLAGS.get(value.strip().lower()) if isinstance(value, str) else value
        if not isinstance(flag, bool):
            raise _wrong(name, f"{name} is true or false, not {_show(value)}.", "Expected true or false.")
        return flag
    if kind == "names":
        names = [part for part in value.split(",") if part] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(item, str) for item in names):
            raise _wrong(name, f"{name} is a list of output names, not {_show(value)}.", "Expected names.")
        return names
    if not isinstance(value, list):  # "list": its items are checked where they are used
        raise _wrong(name, f"{name} is a list, not {_show(value)}.", "Expected a list.")
    return value


def _whole(name: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    low, high = RANGES.get(name, (0, max_threads()))
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _wrong(name, f"{name} is a whole number from {low} to {high}, not {_show(value)}."
                     + (" (threads and worker_num: 0 is the worker's default)" if name != "batch_size" else ""),
                     "Out of range." if isinstance(value, int) and not isinstance(value, bool) else
                     "Expected a whole number.")
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _wrong(name: str, detail: str, short: str) -> HubError:
    return HubError("invalid", detail, errors={name: [short]})
