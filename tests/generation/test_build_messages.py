"""Issue 57, point 6: a generation build that fails in the sandbox says the builder's or the runtime's own
cause (a coded refusal as it is; a runtime error's last line, without host paths), never "failed inside
hpcfair (CodedError) … try another opset"."""

from __future__ import annotations

import json
import shutil

import pytest
from hpcfair.convert import ConversionError, sandbox

from tests.generation.lm import save_lm

pytestmark = [pytest.mark.slow, pytest.mark.cpu]


def _build_in_sandbox(tmp_path, prepare) -> ConversionError:
    work = tmp_path / "work"
    work.mkdir()
    prepare(work / "src")
    with pytest.raises(ConversionError) as caught:
        sandbox.run({"task": "generation_build", "source": "src", "output": "out", "precision": "fp32"}, work)
    assert "opset" not in caught.value.detail and "CodedError" not in caught.value.detail
    assert str(tmp_path) not in caught.value.detail
    return caught.value


def test_a_coded_refusal_reaches_the_user_as_it_is(tmp_path):
    def bert(folder):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))

    error = _build_in_sandbox(tmp_path, bert)
    assert error.code == "unsupported_model" and "BertModel has no generation build" in error.detail


def test_a_failure_inside_the_build_names_its_cause(tmp_path):
    """A llama whose tokenizer_config.json is not JSON: onnxruntime-genai's builder fails, and the message is
    its own last line (the JSON error), not an opset to try."""
    def broken(folder):
        save_lm(folder, "llama")
        (folder / "tokenizer_config.json").write_text("{not json")

    error = _build_in_sandbox(tmp_path, broken)
    assert error.code == "conversion_failed" and "onnxruntime-genai's builder failed" in error.detail
    assert "JSONDecodeError: Expecting property name" in error.detail, error.detail
    shutil.rmtree(tmp_path / "work", ignore_errors=True)
