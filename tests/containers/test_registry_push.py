"""The worker's step after an MLCube build: the image pushed to the hub's registry under the cube's name, with a
token made for the push and revoked after it; ``podman pull``/``skopeo`` read it back from the served hub."""

from __future__ import annotations

import hashlib
import os
import shutil
from urllib.parse import urlsplit

import pytest

from hub.accounts.models import ApiToken
from hub.containers.registry import push_as, push_image, registry_reference
from tests.oci.test_clients import run, tiny_image


@pytest.mark.django_db
def test_the_reference_is_the_cube_artifacts_name_and_the_version_label(settings, owner, publish):
    _, version = publish(owner, "CNN", label="1-onnx")
    settings.HUB_CUBE_REGISTRY = ""
    assert registry_reference(version) is None  # no registry: images stay on the worker
    settings.HUB_CUBE_REGISTRY = "hub.example.org:8443/"
    assert registry_reference(version) == "hub.example.org:8443/alice/cnn-mlcube:1-onnx"


@pytest.mark.django_db
@pytest.mark.services
def test_a_failed_push_is_reported_and_its_token_revoked(settings, owner):
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: scripts/system-deps.sh test installs it")
    settings.HUB_CUBE_REGISTRY_TLS_VERIFY = False
    result = push_as("podman", "localhost/hpcfair-oci-test/never-built:0", "127.0.0.1:9/alice/x-mlcube:1", owner)
    assert result["pushed"] is False and result["reference"] == "127.0.0.1:9/alice/x-mlcube:1" and result["error"]
    token = ApiToken.objects.get(user=owner, name="MLCube image push")
    assert token.revoked is not None and token.prefix not in result["error"]


@pytest.mark.slow
@pytest.mark.services
def test_a_built_image_is_pushed_to_the_served_hub_and_pulled_back(embedded_hub, settings, tmp_path):
    url, token, _ = embedded_hub
    settings.HUB_CUBE_REGISTRY_TLS_VERIFY = False
    local = tiny_image(tmp_path, f"localhost/hpcfair-oci-test/cube:{os.getpid()}")
    reference = f"{urlsplit(url).netloc}/demo/tiny-mlcube:1"
    try:
        result = push_image("podman", local, reference, "demo", token)
        assert result["pushed"] is True, result
        raw = run("skopeo", "inspect", "--raw", "--tls-verify=false", "--creds", f"demo:{token}",
                  f"docker://{reference}")
        assert raw.returncode == 0 and f"sha256:{hashlib.sha256(raw.stdout.encode()).hexdigest()}" == result["digest"]
    finally:
        run("podman", "rmi", "--force", local)


@pytest.mark.django_db
def test_the_cubes_page_names_the_pushed_reference(owner, tmp_path, client):
    from hub.registry import services
    from tests.conftest import staged, valid_metadata

    reference = "hub.example.org/alice/cnn-mlcube:1-onnx"
    # the page's container section is the version metadata's "container", which the job writes (a model here, so
    # that the test needs no built cube archive)
    artifact = services.create_artifact(owner, kind="model", name="cnn-mlcube", title="MLCube of cnn")
    container = {"image": reference, "built": True, "registry": {"reference": reference, "pushed": True,
                                                                  "digest": "sha256:" + "a" * 64}}
    version = services.create_version(artifact, owner, files=[staged(tmp_path, "w.bin", b"weights")],
                                      label="1-onnx", metadata=valid_metadata("model", container=container,
                                                                              container_image=reference),
                                      system=True)  # the hub's own fields, as the container job writes them
    page = client.get(f"/landing/{version.pid}").content.decode()
    assert f"podman pull {reference}" in page and f"apptainer pull docker://{reference}" in page
