"""``hpcfair``: the Python client of the HPCFair Hub.

``from hpcfair import modelAPI`` gives the papers' task API; ``HubClient`` is the REST API underneath.
"""

import importlib
import logging
import warnings
from typing import Any

from hpcfair.errors import (
    AccessDeniedError,
    ConfigError,
    ConflictError,
    DuplicateVersionError,
    GoneError,
    HubError,
    InsufficientScopeError,
    InvalidInputsError,
    InvalidMetadataError,
    JobError,
    NotAuthenticatedError,
    NotFoundError,
    NotReadyError,
    NoWorkerError,
    OfflineError,
    RateLimitedError,
    RunError,
    ServerError,
    StorageQuotaError,
    TransferError,
    UploadError,
    ValidationError,
)

# ``PermissionError`` is not listed: ``from hpcfair import *`` must not shadow the builtin. The old name still
# imports (deprecated), as ``AccessDeniedError``, which is also a builtin ``PermissionError``.
__all__ = [
    "AccessDeniedError", "ConfigError", "ConflictError", "Dataset", "DuplicateVersionError", "GoneError",
    "HubClient", "HubError", "InsufficientScopeError", "InvalidInputsError", "InvalidMetadataError", "JobError",
    "NoWorkerError", "NotAuthenticatedError", "NotFoundError", "NotReadyError", "OfflineError", "RateLimitedError",
    "RunError", "ServerError", "StorageQuotaError", "TransferError", "UploadError", "ValidationError", "modelAPI",
]

# A library's logs are its user's to show: nothing prints them unless logging is configured (the hub's workers
# do; the CLI does with HPCFAIR_DEBUG=1). The sandbox's child's stderr is logged, so a local conversion that
# fails prints its one-line error only, not the child's tracebacks.
logging.getLogger("hpcfair").addHandler(logging.NullHandler())

# Imported when first used: a program of the package that needs neither (``python -m hpcfair.slurm_runner`` on
# a compute node, ``hpcfair.convert`` in the hub's workers) does not pay for pydantic and requests (~1.3 s).
_LAZY = {"Dataset": "hpcfair.api", "modelAPI": "hpcfair.api", "HubClient": "hpcfair.client"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "PermissionError":
        warnings.warn("hpcfair.PermissionError is deprecated: use hpcfair.AccessDeniedError (the old name "
                      "shadowed the builtin)", DeprecationWarning, stacklevel=2)
        return AccessDeniedError
    raise AttributeError(f"module 'hpcfair' has no attribute {name!r}")
