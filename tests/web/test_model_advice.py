"""What a model version's page offers and advises: the fine-tune form only where the fine-tune service would
start (never on ONNX, never on a plain torch.save file), and a next step after a failed conversion that does
not fail the same way. Real files made by torch.save and torch.jit.save."""

from __future__ import annotations

import pytest
from django.test import Client

from hub.errors import HubError
from hub.finetune.services import model_source
from tests.conversions.test_torch_save import saved

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.django_db


def page_of(user, version) -> str:
    client = Client()
    client.force_login(user)
    return client.get("/" + version.pid, follow=True).content.decode()


def test_an_onnx_version_offers_no_fine_tune_and_a_torchscript_one_does(owner, publish, tmp_path):
    _, onnx = publish(owner, "onnx-only", {"model.onnx": b"\x08\x07 onnx bytes"})
    _, script = publish(owner, "scripted", {"model.pt": saved(tmp_path, "script").read_bytes()})
    assert 'id="finetune"' not in page_of(owner, onnx)
    with pytest.raises(HubError) as caught:  # the service refuses it too
        model_source(onnx, None)
    assert caught.value.code == "not_trainable"
    assert 'id="finetune"' in page_of(owner, script) and "Start fine-tuning" in page_of(owner, script)
    assert script.metadata["format"] == "torchscript"


@pytest.mark.parametrize("what", ["module", "state_dict"])
def test_a_plain_torch_save_file_is_not_called_torchscript_nor_offered_a_fine_tune(owner, publish, tmp_path, what):
    _, version = publish(owner, f"saved-{what}".replace("_", "-"), {"model.pt": saved(tmp_path, what).read_bytes()})
    assert version.metadata["format"] == "pytorch" and version.metadata["framework"] == "pytorch"
    assert 'id="finetune"' not in page_of(owner, version)
    with pytest.raises(HubError) as caught:
        model_source(version, None)
    assert caught.value.code == "not_trainable" and "torch.save" in caught.value.message


@pytest.mark.parametrize(("code", "advice"), [
    ("unsupported_format", "torch.jit.save(torch.jit.script("),
    ("weights_only", "Load them into your model"),
])
def test_a_failed_conversion_of_a_torch_save_file_is_not_told_to_convert_it_locally(owner, publish, tmp_path,
                                                                                    code, advice):
    from hub.jobs.models import Job

    _, version = publish(owner, "pickled", {"model.pt": saved(tmp_path, "module").read_bytes()})
    Job.objects.create(kind="convert", requester=owner, version=version, state=Job.State.FAILED, error_code=code,
                       error_detail="model.pt is a whole module pickled with torch.save.")
    shown = Client().get("/" + version.pid, follow=True).content.decode()
    assert f"<strong>{code}</strong>" in shown and advice in shown.replace("&quot;", '"').replace("&#x27;", "'")
    assert "hpcfair convert FILE" not in shown
