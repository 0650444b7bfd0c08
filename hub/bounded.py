"""Bounded parsing of untrusted JSON and YAML: one place that every request body and form field goes through.

Parsers recurse (Python's ``json`` and PyYAML's composer), so a deeply nested document raised a
RecursionError (a 500); YAML aliases let 300 bytes expand to millions of nodes (seconds of CPU in whatever
walks the result). Here JSON is read by orjson (no recursion, its own limit of 1024 levels) and then
checked against ``HUB_PARSE_MAX_DEPTH``; YAML's event stream is scanned *before* anything is built, and the
scan stops at the first level past the depth limit or the first node past ``HUB_PARSE_MAX_NODES``, counting
every alias as the nodes it stands for. What comes back holds JSON types only.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import orjson
import yaml
from django.conf import settings
from rest_framework import parsers

from hub.errors import HubError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser does not recurse per level
_START = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_END = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class TooDeep(ValueError):
    """The document nests deeper than ``HUB_PARSE_MAX_DEPTH``."""


class TooLarge(ValueError):
    """The document stands for more than ``HUB_PARSE_MAX_NODES`` values (aliases counted expanded)."""


def depth_of(value: Any, limit: int) -> int:
    """How deep ``value`` nests (a scalar is 0); raises TooDeep past ``limit``. Iterative: no recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        if level > limit:
            raise TooDeep(f"nested deeper than {limit} levels")
        deepest = max(deepest, level)
        stack.extend((child, level) for child in children if isinstance(child, (dict, list)))
    return deepest


def load_json(data: bytes | str, *, what: str = "The body", walk: bool = True) -> Any:
    """``data`` as JSON, at most ``HUB_PARSE_MAX_DEPTH`` levels deep; a 400 ``malformed_request`` otherwise.

    ``walk=False`` leaves the depth to orjson's own limit (1024, no recursion) and the caller: the
    inference gateway, whose tensors are long lists that numpy refuses past 64 dimensions anyway."""
    limit = settings.HUB_PARSE_MAX_DEPTH
    try:
        value = orjson.loads(data)
        if walk:
            depth_of(value, limit)
    except TooDeep:
        raise _too_deep(what, limit)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own limit (1024 levels)
            raise HubError("malformed_request", f"{what} nests too deep (depth limit exceeded).")
        raise HubError("malformed_request", f"{what} is not valid JSON ({exc}).")
    return value


def _too_deep(what: str, limit: int) -> HubError:
    return HubError("malformed_request", f"{what} nests deeper than {limit} levels (depth limit exceeded).")


class Unreadable(ValueError):
    """A document that does not parse or passes a limit; the text says why, for the person who wrote it."""


def check_yaml(text: str, max_depth: int, max_nodes: int) -> None:
    """Walk YAML's events without building anything: TooDeep / TooLarge as soon as a limit is passed.

    Each collection's size is the sum of its children's, an alias counting as the size of the node its
    anchor names, so an alias bomb is refused after reading its few hundred bytes.

    The limits hold whatever limits the parser has of its own: libyaml's scanner reads ahead of the events
    (up to 1024 characters for a possible key), and PyYAML 6.0.4's libyaml refuses nesting past 1000 levels
    there, before this walk sees the 65th level. A parse error is therefore looked at again with PyYAML's
    pure-Python parser, which has no nesting limit and does not recurse: a document that passes the depth
    limit is TooDeep, whatever the first parser said; any other error is the first parser's."""
    try:
        _walk(yaml.parse(text, Loader=_Loader), max_depth, max_nodes)
    except yaml.YAMLError as first:
        if _Loader is not yaml.SafeLoader:
            try:
                _walk(yaml.parse(text, Loader=yaml.SafeLoader), max_depth, max_nodes)
            except yaml.YAMLError:
                pass  # the same document's error, told by the first parser
        if "nesting depth" in str(getattr(first, "problem", "")):  # a parser's own limit, under a higher setting
            raise TooDeep("nests deeper than the YAML parser reads") from first
        raise


def _walk(events, max_depth: int, max_nodes: int) -> None:
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = []  # [anchor, expanded size so far] per open collection
    total = 0
    for event in events:
        if isinstance(event, _START):
            if len(stack) >= max_depth:
                raise TooDeep(f"nests deeper than {max_depth} levels")
            stack.append([event.anchor, 1])
            continue
        if isinstance(event, _END):
            anchor, size = stack.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:  # an alias inside the node it names: a structure that holds itself
                raise Unreadable(f"the alias *{event.anchor} refers to a node that holds it, or to no anchor")
            anchor, size = None, sizes[event.anchor]
        else:
            continue
        if anchor is not None:
            sizes[anchor] = size
        if stack:
            stack[-1][1] += size
            size = stack[-1][1]
        else:
            total += size
            size = total
        if size > max_nodes:
            raise TooLarge(f"stands for more than {max_nodes} values")


def load_json_or_yaml(text: str | bytes, *, what: str) -> Any:
    """A form field holding JSON or YAML (JSON is YAML; orjson reads it first, fast), bounded in depth and
    in expanded size; the result holds JSON types only (dates become ISO strings). 400 ``invalid``."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    try:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return load_yaml(text)
        depth_of(value, settings.HUB_PARSE_MAX_DEPTH)
        return value
    except TooDeep:
        why = f"it nests deeper than {settings.HUB_PARSE_MAX_DEPTH} levels (depth limit exceeded)"
    except Unreadable as exc:
        why = str(exc)
    raise HubError("invalid", f"The form field {what!r} must hold JSON or YAML; {why}.", errors={what: [why + "."]})


def load_yaml(text: str) -> Any:
    """YAML within ``HUB_PARSE_MAX_DEPTH`` and ``HUB_PARSE_MAX_NODES``, as JSON types; Unreadable otherwise."""
    limit = settings.HUB_PARSE_MAX_DEPTH
    try:
        check_yaml(text, limit, settings.HUB_PARSE_MAX_NODES)
        return _plain(yaml.load(text, Loader=_Loader))  # noqa: S506 - a safe loader, checked above
    except Unreadable:
        raise
    except TooDeep as exc:
        raise Unreadable(f"it {exc} (depth limit exceeded)")
    except TooLarge:
        raise Unreadable(f"its aliases expand to more than {settings.HUB_PARSE_MAX_NODES} values")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise Unreadable(f"it does not parse as JSON or YAML{where}")
    except (ValueError, TypeError, OverflowError):  # e.g. an integer of more digits than Python converts
        raise Unreadable("it holds a value that cannot be read (a number too long?)")


def _plain(value: Any) -> Any:
    """YAML's extra types as JSON's: dates as ISO strings, scalar keys as strings; NaN, infinities, binary
    and sets refused (PostgreSQL's jsonb stores none of them)."""
    if isinstance(value, dict):
        return {_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        raise Unreadable("it holds NaN or an infinity, which JSON cannot store")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise Unreadable(f"it holds a YAML {type(value).__name__}, which JSON cannot store")


def _key(key: Any) -> str:
    if isinstance(key, (str, int, float, bool)) or key is None:
        return key if isinstance(key, str) else orjson.dumps(key).decode()
    if isinstance(key, (datetime.date, datetime.datetime)):
        return key.isoformat()
    raise Unreadable("its keys must be plain names")


def read_limited(stream, length: int | None, limit: int) -> bytes:
    """At most ``limit`` bytes of ``stream``; 413 ``request_too_large`` without reading a larger body."""
    if length is not None and length > limit:
        raise body_too_large(length, limit)
    data = stream.read(limit + 1) if stream is not None else b""
    if len(data) > limit:
        raise body_too_large(None, limit)
    return data


def body_too_large(length: int | None, limit: int) -> HubError:
    size = f"is {length / 2**20:.1f} MiB" if length is not None else "is larger than that"
    return HubError("request_too_large", f"The request body {size}; this endpoint takes up to "
                                         f"{limit / 2**20:.1f} MiB. Send files as uploads (POST /api/v1/uploads/).")


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, bounded: the body's size (``DATA_UPLOAD_MAX_MEMORY_SIZE``, 413 before reading) and
    its depth (``HUB_PARSE_MAX_DEPTH``, 400). A subclass of DRF's, because DRF hands its JSON parser a copy
    of the body and leaves the request's own stream for views that read it again (the gateway does)."""

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        request = (parser_context or {}).get("request")
        meta = getattr(request, "META", {}) if request is not None else {}
        try:
            length = int(meta.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = None
        return load_json(read_limited(stream, length, settings.DATA_UPLOAD_MAX_MEMORY_SIZE))
