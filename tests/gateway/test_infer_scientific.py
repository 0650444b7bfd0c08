"""Issue 58: a batch run over a NetCDF variable of a dataset (``dataset_file: x.nc:/inputs/x``) through a real
Celery worker: the variable is read in the sandbox into a .npy the engine maps, and the outputs equal those of
the same array published as ``.npy``."""

from __future__ import annotations

import numpy as np
import pytest
from hpcfair.convert import sandbox

from hub.jobs.models import Job
from tests.conftest import wait_for_job
from tests.gateway import models
from tests.gateway.test_infer import infer_url, npy, published_outputs

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MLP = models.mlp()
ROWS = np.random.default_rng(58).standard_normal((100, 784)).astype(np.float32)


def netcdf(rows: np.ndarray, path, zlib: bool = True) -> bytes:
    import netCDF4

    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("sample", None)
        ds.createDimension("pixel", rows.shape[1])
        group = ds.createGroup("inputs")
        group.createVariable("x", "f4", ("sample", "pixel"), chunksizes=(10, rows.shape[1]), zlib=zlib)[:] = rows
    return path.read_bytes()


def test_a_netcdf_variable_runs_as_the_same_array_published_as_npy(shared_storage, owner, publish, api, tmp_path):
    """Deflated, the variable is copied into a .npy as it is read; stored as it is used, its own bytes in the
    stored file are mapped (nothing copied, where the sandbox can mount the file read-only)."""
    publish(owner, "mlp", {"mlp.onnx": MLP})
    publish(owner, "as-netcdf", {"x.nc": netcdf(ROWS, tmp_path / "x.nc")}, kind="dataset")
    publish(owner, "as-plain-netcdf", {"x.nc": netcdf(ROWS, tmp_path / "plain.nc", zlib=False)}, kind="dataset")
    publish(owner, "as-npy", {"inputs.npy": npy(ROWS)}, kind="dataset")
    outputs, logs = {}, {}
    for name, file in (("as-netcdf", "x.nc:/inputs/x"), ("as-plain-netcdf", "x.nc:/inputs/x"),
                       ("as-npy", "inputs.npy")):
        response = api.post(infer_url(), {"dataset": f"alice/{name}", "dataset_file": file, "batch_size": 32},
                            format="json")
        assert response.status_code == 202, response.content
        job = wait_for_job(response.json()["id"], timeout=180)
        assert job.state == Job.State.SUCCEEDED, (job.error_code, job.error_detail)
        _, outputs[name] = published_outputs(job)
        logs[name] = " ".join(line["message"] for line in job.log)
    np.testing.assert_array_equal(outputs["as-netcdf"]["logits"], outputs["as-npy"]["logits"])
    np.testing.assert_array_equal(outputs["as-plain-netcdf"]["logits"], outputs["as-npy"]["logits"])
    assert "nothing copied" not in logs["as-netcdf"]
    if sandbox.reads_in_place(shared_storage):
        assert "read where it lies in its file" in logs["as-plain-netcdf"], logs["as-plain-netcdf"]
    np.testing.assert_allclose(outputs["as-netcdf"]["logits"], models.reference(MLP, {"x": ROWS})["logits"],
                               rtol=1e-5, atol=1e-6)

    jobs = Job.objects.count()
    missing = api.post(infer_url(), {"dataset": "alice/as-netcdf", "dataset_file": "x.nc:/inputs/y"}, format="json")
    assert missing.status_code == 404 and missing["X-Error-Code"] == "not_found"
    assert "x.nc has no variable '/inputs/y'; it has /inputs/x" in missing.json()["detail"]
    assert Job.objects.count() == jobs  # the refused run made no job
