"""The card the hub writes for a version published without one (issue 55): Markdown made from its metadata,
which the landing page shows where no card was uploaded, so that every page leads with a card."""

from __future__ import annotations

from typing import Any

from hub.gateway.tensors import shape_text

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
    lines += [f"*The hub wrote this card from the {kind}'s metadata: none was uploaded with this version.*"]
    return "\n".join(lines) + "\n"

