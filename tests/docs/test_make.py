"""`make docs` serves the manual, `make docs-build` builds it strictly into the folder the hub serves, and `make run`
builds it before it serves the hub (issue 56)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def recipes() -> dict[str, tuple[str, str]]:
    makefile = (ROOT / "Makefile").read_text()
    return {target: (needs, body) for target, needs, body in
            re.findall(r"^([\w-]+):([^\n]*)\n((?:\t[^\n]*\n)*)", makefile, re.M)}


def test_docs_serves_and_docs_build_builds_strictly():
    found = recipes()
    assert "mkdocs serve --strict" in found["docs"][1]
    assert "mkdocs build --strict" in found["docs-build"][1]
    assert "docs-build" in found["run"][0].split()


def test_the_site_is_built_where_the_hub_serves_it_and_offline():
    from hub.manual.settings_doc import read_settings

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    served = {row.variable: row for row in read_settings((ROOT / "hub" / "settings.py").read_text())}["HUB_DOCS_DIR"]
    assert served.default == f'BASE_DIR / "{config["site_dir"]}"'  # the checkout's site/, where mkdocs builds
    assert config["theme"]["font"] is False and config["strict"] is True
    assert config["dev_addr"].startswith("127.0.0.1:")
    assert "hub/manual/hook.py" in config["hooks"]
