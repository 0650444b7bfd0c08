"""Issue 36: the client runs a hub model whose weights live in a data file of its version (ONNX external data)
locally (``load_model``), from its cache; a graph naming a file outside its version is refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hpcfair import HubError, modelAPI
from onnx.external_data_helper import convert_model_to_external_data

from tests.conftest import valid_metadata
from tests.gateway.models import mlp, reference


def external_files(tmp_path, location: str) -> list:
    model = onnx.load_from_string(mlp(seed=4))
    convert_model_to_external_data(model, location="mlp.onnx.data", size_threshold=0)
    onnx.save_model(model, str(tmp_path / "mlp.onnx"))
    if location != "mlp.onnx.data":
        for tensor in model.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = location
        (tmp_path / "mlp.onnx").write_bytes(model.SerializeToString())
    return [tmp_path / "mlp.onnx", tmp_path / "mlp.onnx.data"]


@pytest.mark.django_db(transaction=True)
def test_load_model_takes_the_data_file_of_the_version(live_server, owner, tmp_path, settings):
    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    _, token = ApiToken.issue(owner, scope="write")
    api = modelAPI(live_server.url, token)
    (tmp_path / "ok").mkdir()
    published = api.upload(name="external-mlp", files=external_files(tmp_path / "ok", "mlp.onnx.data"),
                           metadata=valid_metadata(framework="onnx", task="classification"))
    session = api.load_model(f"alice/external-mlp@{published['version']}")
    x = np.random.default_rng(1).standard_normal((2, 784)).astype(np.float32)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], reference(mlp(seed=4), {"x": x})["logits"],
                               rtol=1e-5, atol=1e-6)

    (tmp_path / "bad").mkdir()
    bad = api.upload(name="escaping-mlp", files=external_files(tmp_path / "bad", "../../mlp.onnx.data"),
                     metadata=valid_metadata(framework="onnx", task="classification"))
    with pytest.raises(HubError) as refused:
        api.load_model(f"alice/escaping-mlp@{bad['version']}")
    assert refused.value.code == "model_load_failed" and "outside the model's folder" in str(refused.value)
