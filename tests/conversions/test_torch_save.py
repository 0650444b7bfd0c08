"""A plain torch.save file is told from a TorchScript one by its zip's members, and told apart by what it holds
(a state_dict or a whole pickled module), with advice that works: real files made by torch.save and
torch.jit.save here. Nothing in these checks unpickles the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from hpcfair.convert import ConversionError, formats, pickles

torch = pytest.importorskip("torch")


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def saved(folder: Path, what: str, name: str = "model.pt") -> Path:
    """``module`` (torch.save of the module), ``state_dict``, ``checkpoint`` (a dict of state_dicts and
    numbers, as training loops write) or ``script`` (torch.jit.save)."""
    model, path = _model(), folder / name
    if what == "module":
        torch.save(model, path)
    elif what == "state_dict":
        torch.save(model.state_dict(), path)
    elif what == "checkpoint":
        optimizer = torch.optim.Adam(model.parameters())
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}, path)
    else:
        torch.jit.save(torch.jit.script(model), str(path))
    return path


def _refused(path: Path) -> ConversionError:
    with pytest.raises(ConversionError) as caught:
        formats.detect(path)
    return caught.value


@pytest.mark.parametrize("what", ["state_dict", "checkpoint"])
def test_a_state_dict_saved_with_torch_save_is_weights_only(tmp_path, what):
    error = _refused(saved(tmp_path, what))
    assert error.code == "weights_only", error.detail
    assert "load_state_dict" in error.detail and "torch.jit.save(torch.jit.trace(model" in error.detail


def test_a_whole_pickled_module_says_what_to_upload_instead(tmp_path):
    error = _refused(saved(tmp_path, "module", "model.pth"))
    assert error.code == "unsupported_format"
    assert "torch.nn.modules.container.Sequential" in error.detail
    for way in ("torch.jit.save(", "torch.export.save(", "'model.pt2'", "torch.onnx.export("):
        assert way in error.detail


def test_a_torch_save_file_under_a_name_that_does_not_tell_is_told_by_its_content(tmp_path):
    assert _refused(saved(tmp_path, "state_dict", "last.ckpt")).code == "weights_only"


def test_torchscript_is_still_torchscript(tmp_path):
    assert formats.detect(saved(tmp_path, "script")) == "torchscript"


def test_reading_a_pickle_s_globals_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    hostile = f"cos\nsystem\n(S'touch {marker}'\ntR.".encode()
    assert pickles.scan_bytes(hostile).globals == ["os.system"] and not marker.exists()


@pytest.mark.parametrize(("what", "fmt"), [("module", "pytorch"), ("state_dict", "pytorch"),
                                           ("script", "torchscript")])
def test_the_derived_format_of_a_pt_file_is_what_its_content_is(tmp_path, what, fmt):
    from hub.metadata.derive import FileInfo, derive

    data = saved(tmp_path, what).read_bytes()
    # read through a range reader, as a direct upload's bytes are (no local copy)
    info = FileInfo("model.pt", Path("/nonexistent/model.pt"), len(data),
                    read_range=lambda start, length: data[start:start + length])
    assert derive("model", [info]) == {"format": fmt, "framework": "pytorch"}


def test_a_torchscript_module_whose_code_path_names_models_is_torchscript():
    """A traced Hugging Face model keeps its code under code/__torch__/transformers/models/…: only the entries
    right under the archive's top folder tell a torch.export program (models/, archive_format) from it."""
    traced = ["gpt2/data/0", "gpt2/data.pkl", "gpt2/code/__torch__/transformers/models/gpt2/modeling_gpt2.py",
              "gpt2/constants.pkl", "gpt2/version"]
    exported = ["m/data/weights/weight_0", "m/models/model.json", "m/archive_format", "m/version"]
    saved = ["whole/data.pkl", "whole/data/0", "whole/version"]
    assert [formats.torch_zip_format(n) for n in (traced, exported, saved)] == ["torchscript", "torch-export",
                                                                                  "pytorch"]
