"""Accounting by owner: a job is billed to the Slurm account its requester names, or the owner's default, or
theirs; an account they may not use is refused before anything is queued; the account is in the job and its
``#SBATCH`` lines; jobs at once and storage per organization."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hub.jobs.executors import slurm
from hub.jobs.kinds import Plan
from hub.jobs.models import Job
from hub.jobs.services import create_job
from hub.orgs import billing
from hub.orgs import services as orgs
from hub.orgs.models import Organization, SlurmAccount
from tests.conftest import client_for, multipart_file, valid_metadata
from tests.gateway import models

pytestmark = pytest.mark.django_db(transaction=True)
MLP = models.mlp()


@pytest.fixture
def centre(owner, collaborator, other, make_user, shared_storage, publish):
    """lab (alice admin, bob write, carol read) holds lab-gpu (gpu partition only, QoS high, its default);
    alice has alice-proj, mallory mallory-proj; lab/mlp is an ONNX model."""
    carol = make_user("carol")
    lab = orgs.create_organization(owner, "lab")
    orgs.set_member(lab, collaborator, "write", by="alice")
    orgs.set_member(lab, carol, "read", by="alice")
    SlurmAccount.objects.create(owner=lab.account, account="lab-gpu", partitions=["gpu"], qos="high",
                                is_default=True)
    SlurmAccount.objects.create(owner=owner, account="alice-proj", is_default=True)
    SlurmAccount.objects.create(owner=other, account="mallory-proj")
    model = publish(lab.account, "mlp", {"mlp.onnx": MLP})[1]
    return {"lab": lab, "carol": carol, "model": model}


def _async_infer(user, account: str | None = None):
    body = {"inputs": {"x": np.zeros((1, 784), np.float32).tolist()}, "mode": "async"}
    if account:
        body["account"] = account
    return client_for(user).post("/api/v1/artifacts/lab/mlp/versions/latest/infer", body, format="json")


def test_who_is_billed_for_what(centre, owner, collaborator, other):
    carol, model = centre["carol"], centre["model"]
    assert billing.choose(collaborator, model.artifact.owner, None).account == "lab-gpu"  # the owner's default
    assert billing.choose(carol, model.artifact.owner, None) is None  # a reader: not lab's; no account of hers
    assert billing.choose(owner, owner, None).account == "alice-proj"
    assert billing.choose(owner, model.artifact.owner, "alice-proj").account == "alice-proj"
    with pytest.raises(billing.HubError) as reader:
        billing.choose(carol, model.artifact.owner, "lab-gpu")
    assert reader.value.code == "account_not_allowed"
    assert "belongs to the organization lab; ask one of its admins for the write role" in reader.value.detail
    with pytest.raises(billing.HubError) as stranger:
        billing.choose(collaborator, None, "mallory-proj")
    assert "ask the site's administrators" in stranger.value.detail
    assert "Your accounts: lab-gpu" in stranger.value.detail
    with pytest.raises(billing.HubError) as partition:
        billing.choose(collaborator, model.artifact.owner, None, partition="cpu")
    assert "may use the partitions gpu, not cpu" in partition.value.detail


def test_a_job_names_its_account_and_a_forbidden_one_is_refused_before_queueing(centre, owner, collaborator,
                                                                                  settings):
    refused = _async_infer(collaborator, "mallory-proj")
    assert refused.status_code == 403 and refused.json()["code"] == "account_not_allowed"
    assert refused["X-Error-Code"] == "account_not_allowed" and not Job.objects.filter(kind="infer").exists()
    made = _async_infer(collaborator, "lab-gpu")
    assert made.status_code == 202, made.content
    assert made.json()["account"] == "lab-gpu"
    job = Job.objects.get(pk=made.json()["id"])
    assert (job.account, job.qos) == ("lab-gpu", "high")
    defaulted = _async_infer(owner)  # alice on lab's model: lab's default, she is its admin
    assert Job.objects.get(pk=defaulted.json()["id"]).account == "lab-gpu"

    settings.HUB_SLURM_ACCOUNT, settings.HUB_SLURM_QOS = "site-wide", ""
    script = slurm.batch_script(job, Plan(spec={}, tasks=2, cpus=1), slurm.Partition("gpu"), Path("/tmp/j"), 1)
    assert "#SBATCH --account=lab-gpu" in script and "#SBATCH --qos=high" in script
    assert "site-wide" not in script
    job.account, job.qos = "", ""
    fallback = slurm.batch_script(job, Plan(spec={}), slurm.Partition("cpu"), Path("/tmp/j"), 1)
    assert "#SBATCH --account=site-wide" in fallback and "--qos" not in fallback

    # On a Slurm hub, lab-gpu may not send a cpu job: refused before sbatch, with nothing queued.
    settings.HUB_EXECUTOR, settings.HUB_SLURM_KINDS = "slurm", ["infer"]
    settings.HUB_SLURM_PARTITIONS = "cpu=debug,gpu=gpu"
    before = Job.objects.count()
    cpu = _async_infer(collaborator, "lab-gpu")
    assert cpu.status_code == 403 and "not debug" in cpu.json()["detail"] and Job.objects.count() == before
    with pytest.raises(billing.HubError):
        create_job("infer", collaborator, version=centre["model"], device="cpu", account="lab-gpu")


def test_an_organization_has_its_own_jobs_at_once_and_storage(centre, owner, collaborator):
    active = Job.objects.filter(version__artifact__owner=centre["lab"].account, state__in=("queued", "running")).count()
    Organization.objects.filter(pk=centre["lab"].pk).update(jobs_at_once=active + 1, storage_quota_mb=1)
    assert _async_infer(collaborator).status_code == 202  # the last slot (its publish's own jobs count too)
    second = _async_infer(owner)
    assert second.status_code == 429 and second.json()["code"] == "too_many_jobs"
    assert f"lab has {active + 1} jobs queued or running on its artifacts" in second.json()["detail"]
    body = {"files": [multipart_file("big.bin", b"\0" * (2 * 1024 * 1024))], "metadata": json.dumps(valid_metadata())}
    full = client_for(collaborator).post("/api/v1/artifacts/lab/mlp/versions/", body, format="multipart")
    assert full.status_code == 403 and full.json()["code"] == "storage_quota"
    body = {"files": [multipart_file("big.bin", b"\0" * (2 * 1024 * 1024))], "metadata": json.dumps(valid_metadata())}
    mine = client_for(collaborator).post("/api/v1/artifacts/", {"kind": "model", "name": "own"}, format="json")
    assert mine.status_code == 201
    assert client_for(collaborator).post("/api/v1/artifacts/bob/own/versions/", body,
                                         format="multipart").status_code == 201  # bob's own quota: unlimited


def test_the_site_grants_accounts_with_a_command(owner, make_user):
    from django.core.management import CommandError, call_command

    lab = orgs.create_organization(owner, "lab")
    call_command("hub_slurm_account", "lab", "lab-a", "--partition", "gpu", "--qos", "normal", "--default")
    call_command("hub_slurm_account", "lab", "lab-b", "--default")
    rows = {a.account: a for a in SlurmAccount.objects.filter(owner=lab.account)}
    assert rows["lab-a"].partitions == ["gpu"] and not rows["lab-a"].is_default and rows["lab-b"].is_default
    call_command("hub_slurm_account", "lab", "lab-a", "--remove")
    assert not SlurmAccount.objects.filter(account="lab-a").exists()
    with pytest.raises(CommandError):
        call_command("hub_slurm_account", "nobody", "x")


def test_a_limited_token_lists_only_the_jobs_inside_its_limit(centre, collaborator, publish):
    from hub.accounts.models import ApiToken

    made = _async_infer(collaborator, "lab-gpu").json()["id"]
    mine = publish(collaborator, "own", {"w.bin": b"w"})[1]
    for scope, limit, sees in (("read", {"org": centre["lab"]}, True), ("read", {"artifact": mine.artifact}, False)):
        client = client_for(None)
        client.credentials(HTTP_AUTHORIZATION="Bearer " + ApiToken.issue(collaborator, scope=scope, **limit)[1])
        assert (made in [j["id"] for j in client.get("/api/v1/jobs/").json()["results"]]) is sees
        assert client.get(f"/api/v1/jobs/{made}/").status_code == (200 if sees else 404)
