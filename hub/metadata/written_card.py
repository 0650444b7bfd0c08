"""The card the hub writes for a version published without one (issue 55): Markdown made from its metadata,
stored as the version's ``README.md`` when it is published (``hub.registry.services.create_version``), with the
front matter the Hugging Face Hub reads, so that every version has a card; the landing page writes it the same
way for a version published before the hub stored one."""

from __future__ import annotations

from typing import Any

import yaml

from hub.gateway.tensors import shape_text

NAME = "README.md"
MARK = "*The hub wrote this card from the {kind}'s metadata: none was uploaded with this version.*"

# Fields the card states in its table, in this order, with their words.
SHOWN = (("framework", "Framework"), ("format", "Format"), ("task", "Task"), ("learning_type", "Learning type"),
         ("model_family", "Model family"), ("record_count", "Records"), ("subject", "Subject"),
         ("discipline", "Discipline"), ("target_machine", "Target machine"), ("url", "Home page"))


def _cell(value: Any) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def body(kind: str, metadata: dict[str, Any]) -> str:
    """The card's Markdown: title, description, creators, a table of the main fields, the inputs."""
    lines = [f"# {metadata.get('title') or 'Untitled'}", ""]
    if metadata.get("description"):
        lines += [str(metadata["description"]), ""]
    people = [c.get("name", "") for c in metadata.get("creators") or [] if isinstance(c, dict) and c.get("name")]
    if people:
        lines += [f"By {', '.join(people)}.", ""]
    rows = [(label, metadata[name]) for name, label in SHOWN if metadata.get(name) not in (None, "", [])]
    if metadata.get("license"):
        rows.append(("License", metadata["license"]))
    if rows:
        lines += ["| Field | Value |", "|---|---|", *[f"| {label} | {_cell(value)} |" for label, value in rows], ""]
    inputs = [t for t in metadata.get("inputs") or [] if isinstance(t, dict)]
    if inputs:
        lines += ["## Inputs", "", *[f"- `{t.get('name')}`: shape `{shape_text(t.get('shape'))}`, "
                                     f"{t.get('dtype', '')}" for t in inputs], ""]
    lines += [MARK.format(kind=kind)]
    return "\n".join(lines) + "\n"


def is_written(card: str) -> bool:
    """Whether ``card`` (a version's ``card`` field) is one the hub wrote rather than one uploaded."""
    return card.rstrip().endswith(MARK.partition("{kind}")[2])


def front_matter(metadata: dict[str, Any]) -> dict[str, Any]:
    """The Hugging Face card data of ``metadata``: licence, tags (its keywords) and pipeline tag (its task)."""
    card: dict[str, Any] = {}
    if metadata.get("license"):
        card["license"] = str(metadata["license"]).lower()
    if keywords := [str(k) for k in metadata.get("keywords") or []]:
        card["tags"] = keywords
    if metadata.get("task"):
        card["pipeline_tag"] = metadata["task"]
    return card


def readme(kind: str, metadata: dict[str, Any]) -> tuple[str, str]:
    """The ``README.md`` the hub stores for a version without a card, and the card's body (``card``): the
    front matter, then ``body``."""
    text = body(kind, metadata)
    front = front_matter(metadata)
    return (f"---\n{yaml.safe_dump(front, sort_keys=False, allow_unicode=True)}---\n\n" if front else "") + text, text

