"""The guides' code blocks are checked like code: each shell or Python block is either run by a test or marked as
not runnable, with a reason, by an HTML comment on the line right above its fence:

    <!-- run: tests/web/test_tour.py::test_the_tour_runs_as_one_pasted_block -->
    <!-- not run: it needs a hub with a language model published -->

``check`` lists what is wrong with a page's blocks; the MkDocs hook fails the build on any of it, and
``tests/docs`` also checks that each named test exists and reads the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RUNNABLE = {"sh", "bash", "shell", "console", "python", "py", "pycon"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
MARK = re.compile(r"^\s*<!--\s*(?:(?P<run>run):\s*(?P<test>\S+)|(?P<skip>not run):\s*(?P<reason>.+?))\s*-->\s*$")
MIN_REASON_WORDS = 3


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, first line number, text and the mark above it (or None)."""

    lang: str
    line: int
    text: str
    run: str | None
    reason: str | None


def blocks(markdown: str) -> list[Block]:
    """Every fenced block of ``markdown``, with the run/not-run mark on the line above its fence."""
    lines = markdown.splitlines()
    found: list[Block] = []
    n = 0
    while n < len(lines):
        opened = FENCE.match(lines[n])
        if not opened:
            n += 1
            continue
        fence, start = opened.group("fence"), n
        n += 1
        while n < len(lines) and not lines[n].strip().startswith(fence):
            n += 1
        above = MARK.match(lines[start - 1]) if start else None
        found.append(Block(opened.group("lang").lower(), start + 1, "\n".join(lines[start + 1:n]) + "\n",
                           above.group("test") if above and above.group("run") else None,
                           above.group("reason") if above and above.group("skip") else None))
        n += 1
    return found


def check(markdown: str) -> list[str]:
    """What is wrong with the page's runnable blocks (empty: nothing)."""
    problems = []
    for block in blocks(markdown):
        if block.lang not in RUNNABLE:
            continue
        if block.run is None and block.reason is None:
            problems.append(f"line {block.line}: a {block.lang} block with neither <!-- run: tests/...::test --> "
                            f"nor <!-- not run: reason --> on the line above it")
        elif block.run is not None and not re.fullmatch(r"tests/[\w/]+\.py::\w+", block.run):
            problems.append(f"line {block.line}: 'run:' names a test as tests/path.py::test_name, not {block.run!r}")
        elif block.reason is not None and len(block.reason.split()) < MIN_REASON_WORDS:
            problems.append(f"line {block.line}: 'not run:' needs a reason of {MIN_REASON_WORDS} words or more")
    return problems
