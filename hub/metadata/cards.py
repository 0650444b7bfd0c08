"""Model and dataset cards written for the Hugging Face Hub, read as the hub's own fields.

A Hugging Face folder's README.md carries front matter in that hub's vocabulary (``pipeline_tag``, ``tags``,
``datasets``, ``base_model``, ``license: apache-2.0``, ...). Refusing those keys as unknown would make every
such folder fail to publish, so the ones with a counterpart become hub fields and the rest are kept under
``extra``. Keys that neither hub knows are left for validation to refuse (a typo stays an error). Only the
card is read this way: metadata sent with a version is the hub's own vocabulary."""

from __future__ import annotations

import re
from typing import Any

from markdown_it import MarkdownIt

# The Hugging Face Hub's card metadata (huggingface_hub's ModelCardData and DatasetCardData, and the keys
# its documentation lists) that the hub has no field of the same name for.
HF_MODEL_KEYS = {"language", "license_name", "license_link", "library_name", "tags", "datasets", "metrics",
                 "base_model", "base_model_relation", "pipeline_tag", "model-index", "model_name", "widget",
                 "inference", "co2_eq_emissions", "thumbnail", "new_version", "eval_results_format"}
HF_DATASET_KEYS = {"annotations_creators", "language_creators", "language_details", "multilinguality",
                   "size_categories", "source_datasets", "task_categories", "task_ids", "paperswithcode_id",
                   "pretty_name", "train-eval-index", "configs", "config_names", "dataset_info", "viewer"}
HF_KEYS = HF_MODEL_KEYS | HF_DATASET_KEYS
# Licenses the Hugging Face Hub offers that SPDX does not list: kept as SPDX's own form for such terms.
HF_LICENSES = {"openrail", "openrail++", "bigscience-openrail-m", "creativeml-openrail-m", "bigcode-openrail-m",
               "bigscience-bloom-rail-1.0", "deepfloyd-if-license", "lgpl-lr", "llama2", "llama3", "llama3.1",
               "llama3.2", "llama3.3", "llama4", "gemma", "apple-amlr", "apple-ascl", "cc", "other", "unknown"}
HF_URL = "https://huggingface.co/"
MAX_SOURCES = 50


def _names(value: Any) -> list[str]:
    """A card value that may be one name or a list of them, as names."""
    items = value if isinstance(value, list) else [value]
    return [item.strip() for item in items if isinstance(item, str) and item.strip()]


def _license_ref(name: str) -> str:
    return "LicenseRef-" + (re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-") or "other")


def from_hugging_face(front: dict[str, Any], kind: str) -> dict[str, Any]:
    """The card's front matter with the Hugging Face Hub's keys turned into the hub's fields.

    - ``pipeline_tag`` is the task (models); ``pretty_name`` the title;
    - ``tags`` and ``task_categories`` are keywords;
    - ``datasets`` and ``base_model`` are sources, as their Hugging Face addresses;
    - a license the Hugging Face Hub offers outside SPDX (``openrail``, ``llama3``, ``other`` with a
      ``license_name``) becomes a ``LicenseRef-…``;
    - every other Hugging Face key is kept under ``extra``; a key that became a hub field is not repeated
      there (issue 41, point 7: the page listed ``pipeline_tag`` under Extra beside Task)."""
    if not any(key in HF_KEYS or str(key).startswith("extra_gated") for key in front):
        return front
    out = {key: value for key, value in front.items() if key not in HF_KEYS and not str(key).startswith("extra_gated")}
    mapped = {"tags", "task_categories", "base_model", "datasets"}  # always merged into keywords and sources
    if kind == "model" and "task" not in out and _names(front.get("pipeline_tag")):
        out["task"] = _names(front["pipeline_tag"])[0]
        mapped.add("pipeline_tag")
    if "title" not in out and _names(front.get("pretty_name")):
        out["title"] = _names(front["pretty_name"])[0]
        mapped.add("pretty_name")
    words = _names(out.get("keywords")) + _names(front.get("tags")) + _names(front.get("task_categories"))
    if words:
        out["keywords"] = list(dict.fromkeys(words))[:50]
    sources = _names(out.get("sources")) + [HF_URL + name for name in _names(front.get("base_model"))]
    sources += [f"{HF_URL}datasets/{name}" for name in _names(front.get("datasets"))]
    if sources:
        out["sources"] = list(dict.fromkeys(sources))[:MAX_SOURCES]
    license_ = out.get("license")
    if isinstance(license_, str) and license_.strip().lower() in HF_LICENSES:
        named = _names(front.get("license_name"))
        out["license"] = _license_ref(named[0] if named and license_.strip().lower() == "other" else license_.strip())
        if named and license_.strip().lower() == "other":
            mapped.add("license_name")
    extra = dict(out["extra"]) if isinstance(out.get("extra"), dict) else {}
    extra.update({key: value for key, value in front.items() if key not in out and key not in mapped})
    if extra:
        out["extra"] = extra
    return out


_INLINE = MarkdownIt("commonmark")
_WORDS = {"text", "code_inline"}  # what a reader sees of a line (images, raw HTML and markup are left out)
_SPACES = {"softbreak", "hardbreak"}


def plain(text: str) -> str:
    """One line of a card as the words it shows: ``**bold**``, `` `code` `` and ``[link](url)`` as their text,
    images and raw HTML left out, escapes undone."""
    parsed = _INLINE.parseInline(text)
    children = (parsed[0].children or []) if parsed else []
    words = "".join(t.content if t.type in _WORDS else " " if t.type in _SPACES else "" for t in children)
    return re.sub(r"\s+", " ", words).strip()


def title_and_description(body: str) -> dict[str, str]:
    """The card's first ``#`` heading as a title and its first paragraph of prose as a description, as plain
    text (``plain``), for a version whose metadata has neither (a Hugging Face card usually opens this way)."""
    out: dict[str, str] = {}
    paragraph: list[str] = []
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("# ") and "title" not in out and not paragraph:
            out["title"] = plain(stripped[2:])[:300]
        elif stripped and not stripped.startswith(("#", "<", "!", "|", "```", "---", "-", "*", ">")):
            paragraph.append(stripped)
        elif paragraph:
            break
    if paragraph and plain(" ".join(paragraph)):
        out["description"] = plain(" ".join(paragraph))[:2000]
    return out
