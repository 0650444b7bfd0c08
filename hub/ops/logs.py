"""Probes and scrapes left out of the access log: a load balancer asks ``/readyz`` every few seconds and
Prometheus ``/metrics`` every few more, which would drown the requests people make."""

from __future__ import annotations

import logging

QUIET = frozenset({"/healthz", "/readyz", "/metrics"})


class QuietProbes(logging.Filter):
    """For granian's access logger (``granian.access``), whose records carry the request as a dict of args."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (isinstance(args, dict) and args.get("path") in QUIET)


def quiet_probes(logger: str = "granian.access") -> None:
    """Install the filter once on ``logger`` (the web server's worker calls this as it loads the hub)."""
    target = logging.getLogger(logger)
    if not any(isinstance(f, QuietProbes) for f in target.filters):
        target.addFilter(QuietProbes())
