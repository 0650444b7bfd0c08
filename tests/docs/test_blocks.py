"""The guides' code blocks (issue 56): each shell or Python block of docs/ is run by a test that exists and reads
its page, or marked not runnable with a reason (hub.manual.blocks); the cheap ones run here, for real."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub.manual import blocks

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
HERE = "tests/docs/test_blocks.py::test_the_cheap_blocks_run"


def marked() -> list[tuple[Path, blocks.Block]]:
    return [(page, block) for page in PAGES for block in blocks.blocks(page.read_text())
            if block.lang in blocks.RUNNABLE]


def test_every_runnable_block_is_run_or_says_why_not():
    assert len(PAGES) > 30 and len(marked()) > 10
    problems = {str(page.relative_to(ROOT)): blocks.check(page.read_text()) for page in PAGES}
    assert not {page: found for page, found in problems.items() if found}


def test_each_named_test_exists_and_reads_its_page():
    named = [(page, block) for page, block in marked() if block.run]
    assert len({block.run for _, block in named}) >= 3
    for page, block in named:
        path, _, name = block.run.partition("::")
        source = (ROOT / path).read_text()
        functions = {node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)}
        assert name in functions, block.run
        if block.run == HERE:
            continue  # this file's test reads every page (PAGES) and runs the blocks that name it
        relative = page.relative_to(ROOT / "docs")
        # the test reads the page: it names its file (as a path or as Path parts)
        assert all(part in source for part in relative.parts) or str(relative) in source, (block.run, relative)


def test_the_check_finds_each_kind_of_mistake():
    page = ("```sh\nls\n```\n\n<!-- not run: no -->\n```python\nx = 1\n```\n\n"
            "<!-- run: tests/x.py -->\n```bash\nls\n```\n"
            "\n<!-- not run: needs a GPU node here -->\n```sh\nnvidia-smi\n```\n\n```yaml\na: 1\n```\n")
    found = blocks.check(page)
    assert len(found) == 3
    assert "line 1: a sh block with neither" in found[0]
    assert "line 6" in found[1] and "3 words" in found[1]
    assert "line 11" in found[2] and "tests/path.py::test_name" in found[2]


@pytest.mark.slow
@pytest.mark.cpu
def test_the_cheap_blocks_run(tmp_path):
    """Every block marked with this test, each in a folder of its own where ``.venv`` is the checkout's (the blocks
    name .venv/bin/… as a reader in the checkout types them; what they write stays in the folder)."""
    cheap = [(page, block) for page, block in marked() if block.run == HERE]
    assert len(cheap) >= 3
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "NO_COLOR": "1"}
    for n, (page, block) in enumerate(cheap):
        where = f"{page.relative_to(ROOT)} line {block.line}"
        work = tmp_path / f"block-{n}"
        work.mkdir()
        (work / ".venv").symlink_to(ROOT / ".venv")
        command = [sys.executable, "-c", block.text] if block.lang in {"python", "py"} else \
            ["bash", "-e", "-c", block.text]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (where, done.stdout[-2000:], done.stderr[-2000:])
        assert done.stdout.strip(), where
