"""The manual built once per session, strictly, as `make docs-build` builds it (into a temporary folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).parent / "mkdocs"


def build(site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of the repository's mkdocs.yml into ``site``."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(site)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def built_manual(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("manual") / "site"
    done = build(site)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    return site


def text_of(site: Path, page: str) -> str:
    """The built page's article, tags dropped (what a reader sees of it)."""
    import html
    import re

    source = (site / page / "index.html").read_text()
    article = source[source.index("<article"):source.index("</article>")]
    return html.unescape(re.sub(r"<[^>]+>", "", article))
