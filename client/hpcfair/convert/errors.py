"""Conversion failures with a code and a message a scientist can act on."""

from __future__ import annotations

import re
import sys
import traceback

from hpcfair.compute.errors import CodedError

HOST_PATH = re.compile(r"(?:/[\w.+@-]+){2,}/?")  # a host path in a library's message: not shown


class ConversionError(CodedError):
    """A conversion or verification that could not be done; ``code`` is machine-readable.

    ``detail`` is what the user sees: a fixed text with names we chose. ``cause``, the exception of the
    library that failed, is logged but never shown: its text may carry what a crafted file made the
    library read (a pickle once put /etc/shadow into a ValueError this way)."""

    def __init__(self, code: str, detail: str, *, cause: BaseException | str | None = None) -> None:
        super().__init__(code, detail)
        self.cause = cause


def token(text: str, pattern: str) -> str | None:
    """The first group of ``pattern`` in a library's message, kept only when it is a short identifier (an
    operator or attribute name): the one piece of such a message that may reach the user."""
    found = re.search(pattern, text)
    name = found.group(1) if found else None
    return name if name and re.fullmatch(r"[\w:./-]{1,64}", name) else None


def log_cause(what: str, cause: BaseException | str | None) -> None:
    """Write a library's failure to stderr, which the sandbox keeps in child.log for the hub's own log."""
    if cause is None:
        return
    print(f"hpcfair cause of {what}:", file=sys.stderr)
    if isinstance(cause, BaseException):
        traceback.print_exception(cause, file=sys.stderr)
    else:
        print(cause, file=sys.stderr)
