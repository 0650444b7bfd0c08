"""How the hub's web server is started: granian serving ``hub.wsgi:application``.

granian parses HTTP in Rust and runs the WSGI application in Python threads. Per request it costs about
half of what gunicorn's gthread worker did here (bench/RESULTS.md), which matters for the gateway's
synchronous budget. Uploads reach Django as a stream and downloads are sent as they are read, so a
worker's memory does not grow with the size of a transfer (bench/transfer.py).
"""

from __future__ import annotations

import errno
import socket


def web_command(python: str, bind: str, workers: int, threads: int = 4, access_log: bool = False,
                app: str = "hub.wsgi:application") -> list[str]:
    """The command line that serves ``app`` (the hub unless told) on ``bind`` (``host:port``) with ``workers``
    processes."""
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bind must be host:port, not {bind!r}")
    command = [python, "-m", "granian", "--interface", "wsgi", app, "--host", host.strip("[]"),
               "--port", port, "--workers", str(workers), "--blocking-threads", str(threads),
               "--respawn-failed-workers", "--log-level", "info" if access_log else "warning"]
    return [*command, "--access-log"] if access_log else command


def check_free(bind: str) -> None:
    """Raise OSError ``address already in use`` when something listens on ``bind`` (``host:port``).

    granian binds with SO_REUSEPORT, so a second hub on a taken port starts without an error and the kernel
    splits the connections between the two servers: the other one receives this hub's bearer tokens. A bind
    without SO_REUSEPORT (SO_REUSEADDR only, so a port left in TIME_WAIT by a restart stays usable) fails
    when any socket listens there, whatever options that socket was bound with."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, int(port)))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise OSError(errno.EADDRINUSE, f"address already in use: {bind} is taken by another server; "
                                                "stop it or choose another --bind") from None
            raise OSError(exc.errno, f"cannot listen on {bind}: {exc.strerror}") from None
