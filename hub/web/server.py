"""How the hub's web server is started: granian serving ``hub.wsgi:application``.

granian parses HTTP in Rust and runs the WSGI application in Python threads. Per request it costs about
half of what gunicorn's gthread worker did here (bench/RESULTS.md), which matters for the gateway's
synchronous budget. Uploads reach Django as a stream and downloads are sent as they are read, so a
worker's memory does not grow with the size of a transfer (bench/transfer.py).
"""

from __future__ import annotations


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
