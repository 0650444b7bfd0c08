"""Issue 57, point 1 through the whole hub: a SegFormer folder uploaded over the API is converted by the real
Celery worker with its segmentation head at its preprocessor's size, and only then published as verified; a
version whose metadata asks for the base model of the same folder is refused, never published as verified."""

from __future__ import annotations

import pytest

from hub.registry.models import Version
from tests.conftest import wait_for_job
from tests.conversions import models
from tests.conversions.test_worker import conversion_job, publish_model

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _files(tmp_path) -> dict[str, bytes]:
    folder = tmp_path / models.hf_head_folder(tmp_path, "segformer")
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def test_a_segmenter_is_published_with_its_head(tmp_path, shared_storage, api):
    publish_model(api, "segmenter", _files(tmp_path))
    job = wait_for_job(conversion_job("1", "segmenter").pk, timeout=300)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    meta = Version.objects.get(artifact__name="segmenter", label="1-onnx").metadata
    assert meta["verified"] is True
    conversion = meta["conversion"]["model.onnx"]
    assert conversion["task"] == "image-segmentation" and conversion["hf_class"] == "SegformerForSemanticSegmentation"
    assert [o["name"] for o in meta["outputs"]] == ["logits"] and meta["outputs"][0]["shape"][1] == 5
    assert meta["inputs"][0]["shape"] == ["batch", 3, 48, 64]


def test_a_task_that_would_drop_the_head_is_refused_not_verified(tmp_path, shared_storage, api):
    publish_model(api, "segmenter-base", _files(tmp_path), {"task": "image-feature-extraction"})
    job = wait_for_job(conversion_job("1", "segmenter-base").pk, timeout=300)
    assert job.state == "failed" and job.error_code == "unsupported_format"
    assert "decode_head" in job.error_detail and "without a task" in job.error_detail
    assert not Version.objects.filter(artifact__name="segmenter-base", label="1-onnx").exists()
