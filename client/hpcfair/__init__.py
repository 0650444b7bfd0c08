"""``hpcfair``: the Python client of the HPCFair Hub.

``from hpcfair import modelAPI`` gives the papers' task API; ``HubClient`` is the REST API underneath.
"""

import importlib
from typing import Any

from hpcfair.errors import (
    ConfigError,
    ConflictError,
    HubError,
    JobError,
    NotFoundError,
    PermissionError,
    ServerError,
    TransferError,
    ValidationError,
)

__all__ = [
    "ConfigError", "ConflictError", "Dataset", "HubClient", "HubError", "JobError", "NotFoundError",
    "PermissionError", "ServerError", "TransferError", "ValidationError", "modelAPI",
]

# Imported when first used: a program of the package that needs neither (``python -m hpcfair.slurm_runner`` on
# a compute node, ``hpcfair.convert`` in the hub's workers) does not pay for pydantic and requests (~1.3 s).
_LAZY = {"Dataset": "hpcfair.api", "modelAPI": "hpcfair.api", "HubClient": "hpcfair.client"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hpcfair' has no attribute {name!r}")
