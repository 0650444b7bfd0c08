"""Process start-up for long-running web servers."""

from __future__ import annotations

import ctypes
import gc
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def settle() -> None:
    """Load every URL pattern (and so every view module) now, then move everything made so far out of
    the cycle collector's reach: a full collection over the ~100k objects a started hub holds pauses a
    request for ~100 ms on a small machine, and these objects live as long as the process anyway."""
    from django.urls import get_resolver

    _ = get_resolver().url_patterns
    gc.collect()
    gc.freeze()


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """Have the kernel kill this process (SIGKILL) when the thread that started it ends, as it does when its
    parent is killed: a child that a killed worker leaves behind would otherwise go on holding a model's memory
    until it next looks for its parent. Linux only; elsewhere nothing happens."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class WithoutProcessEnvironment:
    """WSGI middleware: drop the server process's own environment variables from each request's environ.

    granian (like wsgiref, CGI-style) starts every environ from ``os.environ``, so without this Django's
    ``request.META`` would hold the process's settings (``DATABASE_URL`` with its password, secrets) and
    an error report or debug page could show them. Only a key whose value is still the process's own is
    dropped; a request header with a different value under the same name stays, and so do the keys that
    describe the request itself (``SERVER_NAME``, ``PATH_INFO``, ...), whatever the process has.
    """

    REQUEST_KEYS = frozenset({"REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE",
                              "CONTENT_LENGTH", "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "REMOTE_ADDR",
                              "REMOTE_PORT", "GATEWAY_INTERFACE", "SERVER_SOFTWARE"})

    def __init__(self, app: Callable, environment: Mapping[str, str] | None = None) -> None:
        self.app = app
        self.environment = {key: value for key, value in (os.environ if environment is None else environment).items()
                            if key not in self.REQUEST_KEYS and not key.startswith("wsgi.")}

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        for key, value in self.environment.items():
            if environ.get(key) == value:
                del environ[key]
        return self.app(environ, start_response)
