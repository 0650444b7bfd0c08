"""The ONNX project's own conformance data (shipped inside the ``onnx`` wheel) run through the gateway:
each model is published, run by the real worker on its recorded inputs, and its outputs are compared
with the recorded outputs.

The onnx 1.23 wheel no longer ships the per-operator ``node/`` cases; it ships ``simple/``,
``pytorch-operator/`` and ``pytorch-converted/`` (140 models with data sets), which are all used here.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from hub.registry.signals import version_published

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
SUITES = ("node", "simple", "pytorch-operator", "pytorch-converted")  # node/: older wheels
RTOL, ATOL = 1e-3, 1e-5  # as the ONNX backend test runner, with a float32-friendly atol


def cases() -> list[Path]:
    return sorted(p for suite in SUITES if (DATA / suite).is_dir() for p in (DATA / suite).iterdir()
                  if (p / "test_data_set_0").is_dir())


def read_case(folder: Path) -> tuple[bytes, dict[str, np.ndarray], list[np.ndarray]] | None:
    """The model and its first data set; None when a file is not a plain tensor (sequences, optionals)."""
    model = onnx.load(str(folder / "model.onnx"))
    initializers = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    data = folder / "test_data_set_0"
    try:
        inputs = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in sorted(data.glob("input_*.pb"))]
        outputs = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in sorted(data.glob("output_*.pb"))]
    except Exception:  # noqa: BLE001 - a sequence or optional, not a tensor
        return None
    if len(inputs) != len(names) or any(a.dtype.kind not in "biuf" for a in [*inputs, *outputs]):
        return None
    return (folder / "model.onnx").read_bytes(), dict(zip(names, inputs, strict=True)), outputs


def runs_in_process(model: bytes, feeds: dict[str, np.ndarray]) -> bool:
    """Whether this ONNX Runtime build runs the model at all (some node tests use newer opsets)."""
    import onnxruntime as ort

    try:
        ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception:  # noqa: BLE001
        return False
    return True


@pytest.fixture
def no_auto_conversion():
    """Publishing 100+ ONNX files would queue as many verification jobs; this test needs none."""
    from hub.conversions import services as conversions

    version_published.disconnect(dispatch_uid="conversions.auto_convert")
    yield
    version_published.connect(conversions.on_version_published, dispatch_uid="conversions.auto_convert")


def test_onnx_node_conformance_data_through_the_gateway(shared_storage, owner, publish, api, no_auto_conversion):
    compared, skipped, failures = [], {}, []
    for folder in cases():
        case = read_case(folder)
        if case is None:
            skipped[folder.name] = "inputs or outputs are not numeric tensors"
            continue
        model, feeds, expected = case
        if not runs_in_process(model, feeds):
            skipped[folder.name] = "this ONNX Runtime build cannot run it in-process either"
            continue
        name = f"{folder.parent.name}-{folder.name}".replace("_", "-")[:100]
        try:
            publish(owner, name, {"model.onnx": model})
        except Exception as exc:  # noqa: BLE001 - e.g. a dtype the metadata schema does not know
            skipped[folder.name] = f"not publishable: {exc}"
            continue
        buffer = io.BytesIO()
        np.savez(buffer, **feeds)
        response = api.post(f"/api/v1/artifacts/alice/{name}/versions/latest/infer", buffer.getvalue(),
                            content_type="application/x-npz")
        if response.status_code != 200:
            failures.append((folder.name, response.status_code, response.content[:300]))
            continue
        with np.load(io.BytesIO(response.content)) as archive:
            got = [archive[key] for key in archive.files]
        for want, have in zip(expected, got, strict=True):
            if want.shape != have.shape or not np.allclose(have, want, rtol=RTOL, atol=ATOL, equal_nan=True):
                failures.append((folder.name, "differs", float(np.max(np.abs(have.astype(float) - want)))
                                 if want.shape == have.shape else f"{have.shape} != {want.shape}"))
                break
        else:
            compared.append(folder.name)
    print(f"\n{len(compared)} conformance cases compared, {len(skipped)} skipped: {skipped}")
    assert not failures, failures
    assert len(compared) >= 90, (compared, skipped)  # 96 on onnx 1.23.2 + onnxruntime 1.31
