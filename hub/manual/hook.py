"""MkDocs hook (mkdocs.yml ``hooks``): puts the generated reference tables into the pages and fails the build on a
guide's code block that is neither run by a test nor marked as not runnable.

A page asks for a table with ``<!-- generated: NAME -->`` on a line of its own (``hub.manual.reference.GENERATORS``
names them). An unknown name, or code without the words its table needs, stops the build."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for entry in (ROOT, ROOT / "client"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

from mkdocs.exceptions import PluginError  # noqa: E402

from hub.manual import blocks, reference  # noqa: E402

MARKER = re.compile(r"^<!--\s*generated:\s*([\w-]+)\s*-->\s*$", re.M)
_made: dict[str, str] = {}


def on_pre_build(config: Any) -> None:
    """Every build makes its tables anew (``mkdocs serve`` rebuilds after an edit of the code too)."""
    _made.clear()


def generated(name: str) -> str:
    """The table ``name``, made once per build."""
    if name not in reference.GENERATORS:
        raise PluginError(f"<!-- generated: {name} -->: no such table (known: {', '.join(reference.GENERATORS)})")
    if name not in _made:
        try:
            _made[name] = reference.GENERATORS[name]()
        except reference.MissingEntry as error:
            raise PluginError(f"the {name} reference cannot be made: {error}") from error
    return _made[name]


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    problems = blocks.check(markdown)
    if problems:
        raise PluginError(f"{page.file.src_uri}: " + "; ".join(problems))
    return MARKER.sub(lambda match: generated(match.group(1)), markdown)
