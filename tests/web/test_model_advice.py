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


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """The blobs (sha256) read through the configured store from now on."""
    from hub.storage import get_blob_store

    store_class, reads = type(get_blob_store()), []
    read = store_class.open

    def counted(self, sha256, *args, **kwargs):
        reads.append(sha256)
        return read(self, sha256, *args, **kwargs)

    monkeypatch.setattr(store_class, "open", counted)
    return reads


def weights_sha(version) -> str:
    return version.files.get(path="model.pt").blob_id


def test_a_torch_save_files_page_takes_its_format_from_the_metadata_not_the_blob(owner, publish, tmp_path, opened):
    """Publishing read the zip's members once (derived format pytorch): the page does not read them again."""
    _, version = publish(owner, "saved", {"model.pt": saved(tmp_path, "state_dict").read_bytes(), "README.md": b"# M"})
    assert "format" in version.metadata["derived"]
    assert 'id="finetune"' not in page_of(owner, version)
    assert weights_sha(version) not in opened


@pytest.mark.parametrize("how", ["published before the zip was read", "format given by hand"])
def test_where_the_metadata_does_not_settle_it_the_page_reads_the_blob(owner, publish, tmp_path, opened, how):
    """A version published before formats were read from the zip's members was called torchscript whatever
    it held; a format given by hand is not the hub's finding: the page reads the zip's members, as before."""
    _, version = publish(owner, "saved", {"model.pt": saved(tmp_path, "module").read_bytes()})
    derived = [key for key in version.metadata["derived"] if key != "format" or how.startswith("published")]
    version.metadata = {**version.metadata, "format": "torchscript", "derived": derived}
    version.save(update_fields=["metadata"])
    assert 'id="finetune"' not in page_of(owner, version)
    assert weights_sha(version) in opened


def test_a_torchscript_and_a_torch_export_pt_file_are_offered_a_fine_tune(owner, publish, tmp_path):
    """Neither is a plain torch.save file: the form shows (their blobs are read, as the stored torchscript of
    older versions cannot be trusted). A .pt holding a torch.export program is called torch-export, as a .pt2."""
    import io
    import zipfile

    program = io.BytesIO()
    with zipfile.ZipFile(program, "w") as archive:
        for name in ("model/archive_format", "model/data/0", "model/models/model.json"):
            archive.writestr(name, b"0")
    _, script = publish(owner, "scripted", {"model.pt": saved(tmp_path, "script").read_bytes()})
    _, exported = publish(owner, "exported", {"model.pt": program.getvalue()})
    assert exported.metadata["format"] == "torch-export" and script.metadata["format"] == "torchscript"
    for version in (script, exported):
        assert 'id="finetune"' in page_of(owner, version)
        assert model_source(version, None) == {"file": "model.pt"}
