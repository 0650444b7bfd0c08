"""Conversion failures with a code and a message a scientist can act on."""

from __future__ import annotations


class ConversionError(Exception):
    """A conversion or verification that could not be done; ``code`` is machine-readable."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "detail": self.detail}
