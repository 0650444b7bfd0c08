"""Issue 59, point 3: a Hugging Face causal LM folder converted to GGUF by llama.cpp's own tools
(``hpcfair.generate.gguf_build``): a random Llama of a real architecture with this suite's byte-level BPE tokenizer
becomes one GGUF file whose greedy tokens through llama-server are transformers' own, or a coded failure; as a hub
job (kind ``gguf``, ``POST …/convert`` with ``to: gguf``) on a real Celery worker, published converted from its
source and served by llama.cpp."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hpcfair.compute.errors import CodedError

from tests.generation.lm import save_lm

CONVERTER = os.environ.get("HUB_LLAMA_CONVERT", "")


def converter() -> Path:
    """llama.cpp's converter folder (HUB_LLAMA_CONVERT, else where scripts/llama-server.sh puts it), or the test
    skipped with how to get it."""
    from django.conf import settings
    from hpcfair.generate.gguf_build import CONVERTER_FILES

    folder = Path(CONVERTER or settings.HUB_LLAMA_CONVERT)
    if not all((folder / name).exists() for name in CONVERTER_FILES):
        pytest.skip("llama.cpp's convert_hf_to_gguf.py is not installed: scripts/llama-server.sh puts it in "
                    ".venv/share/llama.cpp (or name its folder in HUB_LLAMA_CONVERT)")
    return folder


def test_gpt2s_byte_level_split_is_told_from_tokenizer_json(tmp_path):
    """No llama.cpp needed: what the converter's repair calls GPT-2's split, and what it leaves refused."""
    from hpcfair.generate.hf_to_gguf import gpt2_split
    from tokenizers import normalizers

    from tests.generation.lm import tokenizer

    tokenizer().save_pretrained(tmp_path / "plain")
    assert gpt2_split(tmp_path / "plain")
    lowered = tokenizer()
    lowered.backend_tokenizer.normalizer = normalizers.Lowercase()
    lowered.save_pretrained(tmp_path / "lowered")
    assert not gpt2_split(tmp_path / "lowered") and not gpt2_split(tmp_path / "missing")


@pytest.mark.slow
@pytest.mark.cpu
def test_a_llama_folder_becomes_a_gguf_file_that_decodes_as_transformers(tmp_path):
    from hpcfair.generate.gguf_build import build_gguf, checked, verify
    from hpcfair.gguf_facts import Bounds, describe

    from tests.generation.llama import binary

    folder = converter()
    binary()
    source = save_lm(tmp_path / "llama", "llama")
    report = build_gguf(source, tmp_path / "out", folder, outtype="q8_0")
    path = tmp_path / "out" / "model-q8_0.gguf"
    assert report["file"] == path.name and report["size_bytes"] == path.stat().st_size
    check = report["verification"]
    assert check["passed"] and check["method"].startswith("greedy tokens of llama-server against transformers")
    assert all(case["tokenizer_matches"] for case in check["prompts"])
    assert sum(case["matched"] == case["tokens"] for case in check["prompts"]) >= 2  # a near tie may part one
    facts = describe(path, path.stat().st_size, Bounds(), tmp_path)
    assert facts["architecture"] == "llama" and facts["quantization"] == "Q8_0"
    # another model's weights (the same shapes, another seed) decode otherwise: a coded failure, not a warning
    other = save_lm(tmp_path / "other", "llama", seed=1)
    wrong = verify(other, path, "q8_0")
    assert not wrong["passed"]
    with pytest.raises(CodedError) as refused:
        checked(wrong, "q8_0")
    assert refused.value.code == "verification_failed" and "nothing was published" in refused.value.detail


@pytest.mark.slow
@pytest.mark.cpu
def test_a_tokenizer_llama_cpp_would_split_otherwise_is_refused_in_words(tmp_path):
    """llama.cpp's converter refuses a BPE tokenizer it does not know; the hub says why, naming no host path."""
    from hpcfair.generate.gguf_build import build_gguf
    from tokenizers import normalizers

    source = save_lm(tmp_path / "llama", "llama")
    spec = json.loads((source / "tokenizer.json").read_text())
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(json.dumps(spec))
    tok.normalizer = normalizers.Lowercase()
    tok.save(str(source / "tokenizer.json"))
    with pytest.raises(CodedError) as refused:
        build_gguf(source, tmp_path / "out", converter(), outtype="f32")
    assert refused.value.code == "unsupported_model" and "tokenizer" in refused.value.detail
    assert str(tmp_path) not in refused.value.detail and not (tmp_path / "out" / "model-f32.gguf").exists()


@pytest.mark.slow
@pytest.mark.cpu  # saves two Hugging Face models with transformers: 4-5 s alone, over the fast tier's 4 s
@pytest.mark.django_db
def test_a_gguf_build_is_refused_before_it_is_queued(api, owner, publish, tmp_path, settings):
    """Bad requests are coded 400s in the web process: an unknown type, an ONNX option, a folder that is no
    causal LM; no job is made."""
    from hub.jobs.models import Job
    from tests.generation.lm import folder_files, save_seq2seq

    settings.HUB_GENERATION_AUTO = False
    artifact, version = publish(owner, "tiny-llama", folder_files(save_lm(tmp_path / "llama", "llama")))
    url = f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/convert"
    before = Job.objects.filter(kind="gguf").count()
    for body, code in (({"to": "gguf", "gguf_type": "q3_x"}, "invalid"), ({"to": "gguf", "opset": 17}, "invalid"),
                       ({"gguf_type": "q8_0"}, "invalid")):
        answer = api.post(url, body, format="json")
        assert answer.status_code == 400 and answer.json()["code"] == code, (body, answer.json())
    seq, seq_version = publish(owner, "tiny-bart", folder_files(save_seq2seq(tmp_path / "bart")))
    answer = api.post(f"/api/v1/artifacts/{seq.full_name}/versions/{seq_version.label}/convert", {"to": "gguf"},
                      format="json")
    assert answer.status_code == 400 and answer.json()["code"] == "unsupported_format"
    assert Job.objects.filter(kind="gguf").count() == before


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_hub_builds_a_gguf_version_served_by_llama_cpp(shared_storage, owner, publish, api, tmp_path, settings):
    """``POST …/convert {"to": "gguf"}``: a real worker converts in the sandbox, checks, and publishes the file
    converted from its source; llama.cpp then answers ``…/generate`` on it as llama-server itself does."""
    import openai

    from hub.registry.models import ProvenanceLink
    from tests.conftest import wait_for_job
    from tests.generation.llama import binary, direct
    from tests.generation.lm import folder_files

    converter()
    binary()
    settings.HUB_GENERATION_AUTO = False  # this test's job only
    source = save_lm(tmp_path / "llama", "llama")
    artifact, version = publish(owner, "tiny-llama", folder_files(source))
    accepted = api.post(f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/convert",
                        {"to": "gguf", "gguf_type": "f16"}, format="json")
    assert accepted.status_code == 202, accepted.json()
    job = wait_for_job(accepted.json()["id"], timeout=600)
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    made = artifact.versions.get(label=job.result["version"])
    assert made.label == f"{version.label}-gguf-f16"
    assert sorted(f.path for f in made.files.all()) == ["README.md", "model-f16.gguf"]  # the source's card too
    assert made.metadata["format"] == "gguf" and made.metadata["quantization"] == "F16"
    assert made.metadata["gguf_build"]["verification"]["passed"] is True
    assert made.provenance.get().relation == ProvenanceLink.Relation.CONVERTED_FROM
    assert made.provenance.get().target == version
    ours = api.post(f"/api/v1/artifacts/{artifact.full_name}/versions/{made.label}/generate",
                    {"prompt": "the hub converts", "max_new_tokens": 12, "temperature": 0, "stream": False},
                    format="json")
    assert ours.status_code == 200, ours.json()
    (tmp_path / "got.gguf").write_bytes(api.get(f"/api/v1/artifacts/{artifact.full_name}/versions/{made.label}"
                                                "/files/model-f16.gguf").getvalue())
    threads, context = settings.HUB_GENERATE_THREADS, settings.HUB_LLAMA_CONTEXT
    with direct(tmp_path / "got.gguf", threads=threads, context=context) as url:
        itself = openai.OpenAI(base_url=url, api_key="none", max_retries=0).completions.create(
            model="tiny", prompt="the hub converts", temperature=0, max_tokens=12)
    assert ours.json()["text"] == itself.choices[0].text
    assert ours.json()["completion_tokens"] == itself.usage.completion_tokens
