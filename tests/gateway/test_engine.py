"""The engine (``hub.gateway.engine``): uploaded graphs run in a child process whose memory is bounded by
ONNX Runtime's capped arena and by ``RLIMIT_DATA``, and which is killed when a run passes its deadline.
Each hostile graph is answered with a code, and the engine goes on answering afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from hpcfair.compute import CodedError

from hub.gateway import engine as engine_module
from hub.gateway.engine import Engine, run_steps
from tests.gateway import models

pytestmark = [pytest.mark.slow, pytest.mark.cpu]  # every test starts an engine child, some kill it

LIMIT_MB = 512


@pytest.fixture
def engine(monkeypatch):
    """A fresh engine whose child reads a small memory limit from its environment."""
    monkeypatch.setenv("HUB_INFER_MEMORY_MB", str(LIMIT_MB))
    monkeypatch.setenv("HUB_GATEWAY_CACHE_MB", "64")
    made = Engine()
    monkeypatch.setattr(engine_module, "engine", lambda: made)
    yield made
    made.close()


def model_file(tmp_path: Path, name: str, data: bytes) -> dict[str, str]:
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(data)
    return {"local": str(path)}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def run(step, feeds, seconds: float = 60.0, **options):
    return run_steps([step], feeds, device="cpu", threads=0, deadline=time.time() + seconds, **options)


def test_a_graph_that_asks_for_more_than_the_limit_is_refused_and_the_engine_goes_on(engine, tmp_path):
    step = model_file(tmp_path, "fill", models.fill())
    outputs, info = run(step, {"n": np.array([100, 1000], np.int64)})
    assert float(outputs["total"]) == 100_000.0 and info["provider"] == "CPUExecutionProvider"
    pid = engine.pid
    with pytest.raises(CodedError) as refused:
        run(step, {"n": np.array([20, 268435456], np.int64)})  # 20 GiB of float32
    assert refused.value.code == "memory_limit"
    assert f"{LIMIT_MB} MiB (HUB_INFER_MEMORY_MB)" in refused.value.detail and "20 GiB" in refused.value.detail
    outputs, _ = run(step, {"n": np.array([2, 3], np.int64)})
    assert float(outputs["total"]) == 6.0
    assert engine.pid == pid and engine.starts == 1, "refused by the arena: the same process answered"


def test_memory_a_run_used_is_given_back(engine, tmp_path):
    step = model_file(tmp_path, "fill", models.fill())
    run(step, {"n": np.array([1, 10], np.int64)})
    before = rss_mb(engine.pid)
    outputs, _ = run(step, {"n": np.array([100, 1_000_000], np.int64)})  # 400 MB inside the limit
    assert float(outputs["total"]) == pytest.approx(1e8)
    assert rss_mb(engine.pid) < before + 50, "the arena shrank back after the run"


@pytest.mark.slow
@pytest.mark.cpu  # starts an engine child and drives it to its memory limit
def test_memory_taken_outside_the_arena_is_bounded_by_the_process_limit(engine, tmp_path):
    step = model_file(tmp_path, "tile", models.tile_text())
    text = np.array(["x" * (1 << 20)])  # 1 MiB of characters, tiled 8,000 times: 8 GiB outside the arena
    outputs, _ = run(step, {"s": text, "r": np.array([4], np.int64)})
    assert outputs["y"].tolist() == [4]
    with pytest.raises(CodedError) as refused:
        run(step, {"s": text, "r": np.array([8000], np.int64)})
    assert refused.value.code == "memory_limit"
    outputs, _ = run(step, {"s": text, "r": np.array([2], np.int64)})
    assert outputs["y"].tolist() == [2]


@pytest.mark.slow
@pytest.mark.cpu  # starts an engine child and kills it past its deadline
def test_a_single_kernel_past_its_deadline_is_stopped_by_killing_its_process(engine, tmp_path):
    step = model_file(tmp_path, "long", models.one_long_kernel())
    outputs, _ = run(step, {"n": np.array([3, 3], np.int64)})  # the session is loaded before the clock starts:
    assert float(outputs["total"]) == pytest.approx(6.75)  # a run that starts past its deadline is refused by
    first = engine.pid  # the child itself (ONNX Runtime's terminate flag), and nothing would be killed
    started = time.perf_counter()
    with pytest.raises(CodedError) as stopped:
        run(step, {"n": np.array([6000, 6000], np.int64)}, seconds=1.5)
    waited = time.perf_counter() - started
    assert stopped.value.code == "overtime"
    # Stopped, not finished: the kernel alone takes 10-20 s here (432 GFLOP on one thread). The margin past the
    # deadline and grace is for a loaded machine, where killing and answering took over a second.
    assert waited < 1.5 + engine_module.GRACE_S + 4.0, f"answered after {waited:.1f} s"
    outputs, _ = run(step, {"n": np.array([3, 3], np.int64)})
    assert float(outputs["total"]) == pytest.approx(6.75)
    assert engine.pid != first and engine.starts == 2, "the killed process was replaced by a new one"


def test_a_process_that_dies_mid_run_is_replaced_and_its_caller_answered(engine, tmp_path):
    import threading

    step = model_file(tmp_path, "long", models.one_long_kernel())
    engine.start()
    threading.Timer(0.5, engine.process.kill).start()  # as the kernel's OOM killer would
    with pytest.raises(CodedError) as lost:
        run(step, {"n": np.array([6000, 6000], np.int64)})
    assert lost.value.code == "run_failed"
    assert "was killed (signal 9, as the system does when memory runs out)" in lost.value.detail
    outputs, _ = run(step, {"n": np.array([2, 2], np.int64)})
    assert float(outputs["total"]) == 2.0
    assert engine.starts == 2


def test_string_outputs_cross_as_text(engine, tmp_path):
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "echo",
                              [helper.make_tensor_value_info("s", TensorProto.STRING, [None])],
                              [helper.make_tensor_value_info("t", TensorProto.STRING, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    step = model_file(tmp_path, "echo", model.SerializeToString())
    outputs, _ = run(step, {"s": np.array(["setosa", "versicolor"])})
    assert outputs["t"].tolist() == ["setosa", "versicolor"]


def test_a_jobs_batches_can_be_read_by_the_engine_from_the_npy_itself(engine, tmp_path):
    from hub.gateway.jobs.infer import mapped_source

    step = model_file(tmp_path, "mlp", models.mlp())
    x = np.random.default_rng(5).standard_normal((300, 784)).astype(np.float32)
    np.save(tmp_path / "rows.npy", x)
    source = mapped_source(tmp_path / "rows.npy", {"x": np.load(tmp_path / "rows.npy")})
    assert source == {"path": str(tmp_path / "rows.npy"), "name": "x"}
    outputs, _ = run(step, {}, deadline_is_long=True, source={**source, "rows": [100, 250]})
    np.testing.assert_allclose(outputs["logits"], models.reference(models.mlp(), {"x": x[100:250]})["logits"],
                               rtol=1e-5, atol=1e-6)
    assert mapped_source(tmp_path / "rows.npy", {"x": x.astype(np.float64)}) is None, "a cast array is sent"
    np.savez(tmp_path / "rows.npz", x=x)
    assert mapped_source(tmp_path / "rows.npz", {"x": x}) is None, "only .npy files are mapped"
