from __future__ import annotations

import pytest

from tests.conversions import models


@pytest.fixture(scope="session")
def built_models(tmp_path_factory):
    """Every architecture in ``models.ARCHITECTURES``, built once: name -> (path, metadata)."""
    directory = tmp_path_factory.mktemp("models")
    built = {}
    for name, build in models.ARCHITECTURES.items():
        filename, metadata = build(directory)
        built[name] = (directory / filename, metadata)
    return built
