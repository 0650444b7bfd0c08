"""Issue 57, point 7: a conversion config naming a hub ONNX version at another opset than the one its file
records gets a coded answer saying what to set, not ``KeyError: 'pid'`` (the hub verifies an ONNX version,
it publishes no other), against the embedded hub's own converted demo model."""

from __future__ import annotations

import time

import pytest
import requests
from hpcfair import _registry
from hpcfair.client import HubClient
from hpcfair.errors import HubError

pytestmark = [pytest.mark.slow]


def test_an_onnx_version_at_another_opset_says_what_to_set(embedded_hub):
    base, token, _ = embedded_hub
    for _ in range(120):  # converted when the worker started
        if requests.get(f"{base}/api/v1/artifacts/demo/iris-classifier/versions/1.0-onnx/", timeout=30).ok:
            break
        time.sleep(2)
    client = HubClient(base, token)
    info = client.resolve("demo/iris-classifier@1.0-onnx")
    recorded = info["metadata"]["opset"]
    assert _registry.onnx_version(client, info, recorded) is info and _registry.onnx_version(client, info, None) is info
    other = 12 if recorded != 12 else 13
    with pytest.raises(HubError) as caught:
        _registry.onnx_version(client, info, other)
    assert caught.value.code == "opset_unsupported"
    assert f"opset {recorded}" in str(caught.value) and f"set onnx_version to {recorded}" in str(caught.value)
