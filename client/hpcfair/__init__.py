"""``hpcfair``: the Python client of the HPCFair Hub."""

from hpcfair.client import HubClient
from hpcfair.errors import (
    ConflictError,
    HubError,
    NotFoundError,
    PermissionError,
    TransferError,
    ValidationError,
)

__all__ = [
    "ConflictError", "HubClient", "HubError", "NotFoundError", "PermissionError", "TransferError",
    "ValidationError",
]
