"""Request bodies name only fields the endpoint knows: an unknown one (``partition`` on a fine-tune, a typo
such as ``epoch``) is a 400 ``invalid`` that names it and the closest known field, never a silent default."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from rest_framework import serializers


def unknown_field(name: str, known: Iterable[str]) -> str:
    """What to tell the sender of ``name``: the closest known field, or the list of them."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"Unknown field; did you mean {close[0]!r}?"
    return f"Unknown field; the fields are {', '.join(known)}."


class StrictFields:
    """A serializer mixin: refuse keys of the body that are none of the serializer's fields (a browser form's
    CSRF token aside)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            known = set(self.fields)
            unknown = sorted(str(key) for key in data if key not in known and key != "csrfmiddlewaretoken")
            if unknown:
                raise serializers.ValidationError({key: [unknown_field(key, known)] for key in unknown})
        return super().to_internal_value(data)


class StrictSerializer(StrictFields, serializers.Serializer):
    """A request body's serializer that refuses unknown fields."""
