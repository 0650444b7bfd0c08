"""The batch executors' pure parts: shards, Slurm's time and size formats, the partition map."""

from __future__ import annotations

import pytest
from hpcfair.slurm_runner import shard

from hub.jobs.executors import batch, executor_for, slurm


@pytest.mark.parametrize("total", [0, 1, 7, 50, 1001])
@pytest.mark.parametrize("tasks", [1, 2, 3, 4, 64])
def test_shards_cover_every_row_once_in_order(total, tasks):
    parts = [shard(total, task, tasks) for task in range(tasks)]
    assert parts[0][0] == 0 and parts[-1][1] == total
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))  # contiguous, in task order
    sizes = [end - start for start, end in parts]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize(("text", "seconds"), [("00:00:07", 7), ("01:02:03", 3723), ("1-02:03:04", 93784),
                                               ("03:04.500", 184.5), ("", 0)])
def test_slurm_durations(text, seconds):
    assert batch.seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "size"), [("1024K", 1 << 20), ("1.5G", 3 << 29), ("300M", 300 << 20), ("0", 0)])
def test_slurm_sizes(text, size):
    assert slurm._bytes(text) == size


def test_the_partition_map(settings):
    settings.HUB_SLURM_PARTITIONS = "cpu=short, gpu=gpu:--gres=gpu:a100:1 --constraint=nvlink"
    assert batch.partition_for("cpu") == batch.Partition("short", [])
    assert batch.partition_for("gpu") == batch.Partition("gpu", ["--gres=gpu:a100:1", "--constraint=nvlink"])
    with pytest.raises(batch.CodedError) as caught:
        batch.partition_for("npu")
    assert caught.value.code == "slurm_rejected" and "maps cpu, gpu" in caught.value.detail


def test_which_kinds_run_on_slurm(settings):
    assert executor_for("infer").name == "celery"  # Celery is the default executor
    settings.HUB_EXECUTOR = "slurm"  # the deprecated spelling ...
    settings.HUB_SLURM_KINDS = ["infer", "fixity"]
    assert executor_for("infer").name == "slurm"
    assert executor_for("fixity").name == "celery"  # listed, but the kind has no batch side: Celery runs it
    assert executor_for("container").name == "celery"
    settings.HUB_EXECUTORS = ["container=slurm", "fixity=slurm"]  # ... and the one setting, which wins
    assert [executor_for(kind).name for kind in ("infer", "fixity", "container")] == ["celery", "celery", "slurm"]
