"""The protocol through the hub as deployed: ``make run``'s processes (granian, the worker, SQLite), so that HEAD,
Range and a PID's encoded slashes in a revision cross the production web server, not only Django's test server.
A dataset is pushed with huggingface_hub, then read by datasets and by a version PID."""

from __future__ import annotations

import hashlib

import pytest

pytestmark = pytest.mark.services

CARD = """---
license: cc-by-4.0
pretty_name: Served runs
---
# Served runs

Rows pushed through huggingface_hub to the embedded hub.
"""
CSV = "step,loss\n1,0.5\n2,0.25\n"

SERVED = r"""
import hashlib, os, pathlib, requests
from datasets import load_dataset
from huggingface_hub import HfApi, HfFileSystem, snapshot_download

api, repo, folder = HfApi(), "demo/served-runs", pathlib.Path("folder")
folder.mkdir()
(folder / "README.md").write_text(ARGS["card"])
(folder / "data.csv").write_text(ARGS["csv"])
api.create_repo(repo, repo_type="dataset", exist_ok=True)
commit = api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=folder)
auth = {"Authorization": f"Bearer {os.environ['HF_TOKEN']}"}
pid = requests.get(f"{ENDPOINT}/api/v1/artifacts/{repo}/versions/latest/", headers=auth).json()["pid"]
head = requests.head(f"{ENDPOINT}/datasets/{repo}/resolve/main/data.csv", headers=auth)
snapshot = snapshot_download(repo, repo_type="dataset", revision=pid, local_dir="snap")
with HfFileSystem().open(f"datasets/{repo}/data.csv", "rb", block_size=8) as f:
    f.seek(10)
    ranged = f.read(5).decode()
rows = load_dataset(repo, revision=commit.oid, split="train").to_list()
print(json.dumps({"commit": commit.oid, "by_pid": api.dataset_info(repo, revision=pid).sha,
                  "head": [head.status_code, head.headers.get("Content-Length"), head.headers.get("ETag"),
                           head.headers.get("X-Repo-Commit"), len(head.content)],
                  "snapshot": hashlib.sha256(open(snapshot + "/data.csv", "rb").read()).hexdigest(),
                  "ranged": ranged, "rows": rows}))
"""


@pytest.mark.slow
def test_a_dataset_pushed_to_the_served_hub_reads_back_through_granian(embedded_hub, hf_client):
    url, token, _ = embedded_hub
    out = hf_client(SERVED, token=token, endpoint=url, env={"HF_HUB_DISABLE_XET": "1"}, card=CARD, csv=CSV)
    sha = hashlib.sha256(CSV.encode()).hexdigest()
    assert out["by_pid"] == out["commit"] and len(out["commit"]) == 40
    assert out["head"] == [200, str(len(CSV)), f'"{sha}"', out["commit"], 0]
    assert out["snapshot"] == sha and out["ranged"] == CSV[10:15]
    assert out["rows"] == [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25}]
