"""``hpcfair``: the Python client of the HPCFair Hub.

``from hpcfair import modelAPI`` gives the papers' task API; ``HubClient`` is the REST API underneath.
"""

from hpcfair.api import Dataset, modelAPI
from hpcfair.client import HubClient
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
