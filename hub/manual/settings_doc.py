"""Every setting ``hub/settings.py`` reads from the environment, its default and its description, read from the
source (nothing is imported or run).

The rule: each read (``env("NAME", default)``, ``env_bool``, ``env_list``, ``os.environ.get``) has a comment
that says what it does, either at the end of one of the lines of the expression that reads it, or in the block of
comment lines right above the statement (or the dict entry) it is part of. A section rule (``# --- … ---``) is not
a description. ``settings_table`` raises ``UndescribedSetting`` naming every read that has none.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

SETTINGS_PATH = Path(__file__).resolve().parents[1] / "settings.py"
READERS = {"env", "env_bool", "env_list"}
RULE = re.compile(r"^#\s*-{3,}")


class UndescribedSetting(ValueError):
    """Settings read from the environment without a description comment."""


@dataclass(frozen=True)
class Setting:
    """One environment variable: the Python setting it feeds, its default (source text) and its description."""

    variable: str
    setting: str
    default: str
    description: str
    line: int


def comments(source: str) -> tuple[dict[int, str], dict[int, str]]:
    """Trailing comments and whole-line comments, by line number."""
    trailing: dict[int, str] = {}
    whole: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            (whole if token.line.strip().startswith("#") else trailing)[token.start[0]] = token.string
    return trailing, whole


def _block_above(line: int, whole: dict[int, str]) -> str:
    """The comment lines right above ``line`` (rules excluded), joined."""
    found: list[str] = []
    n = line - 1
    while n in whole and not RULE.match(whole[n]):
        found.append(whole[n].lstrip("#").strip())
        n -= 1
    return " ".join(reversed(found)).strip()


def _default(call: ast.Call, source: str) -> str:
    if call.func.id == "env_bool" if isinstance(call.func, ast.Name) else False:
        return ast.get_source_segment(source, call.args[1]) if len(call.args) > 1 else "off"
    if len(call.args) < 2:
        return ""
    node = call.args[1]
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
        node = node.args[0]
    return ast.get_source_segment(source, node) or ""


def _name_of(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id in READERS:
        pass
    elif (isinstance(func, ast.Attribute) and func.attr in {"get", "getenv"}
          and ast.unparse(func.value) in {"os.environ", "os"}):
        pass
    else:
        return None
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def _targets(statement: ast.stmt) -> str:
    if isinstance(statement, ast.Assign):
        return ", ".join(ast.unparse(t) for t in statement.targets)
    if isinstance(statement, ast.AnnAssign | ast.AugAssign):
        return ast.unparse(statement.target)
    return ""


def read_settings(source: str) -> list[Setting]:
    """Every environment read of ``source`` (a settings module's text), in order, first read of a name only."""
    tree = ast.parse(source)
    trailing, whole = comments(source)
    found: dict[str, Setting] = {}
    for statement in tree.body:
        # the smallest enclosing "item": a dict entry's key line, else the statement
        items: list[tuple[int, int, ast.AST]] = []
        for node in ast.walk(statement):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    start = key.lineno if key is not None else value.lineno
                    items.append((start, value.end_lineno or start, key if key is not None else value))
        for node in ast.walk(statement):
            if not isinstance(node, ast.Call):
                continue
            name = _name_of(node)
            if name is None or name in found:
                continue
            span = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            described = " ".join(trailing[n].lstrip("#").strip() for n in span if n in trailing)
            setting = _targets(statement)
            inside = [item for item in items if item[0] <= node.lineno <= item[1]]
            if inside:
                start, end, key = max(inside, key=lambda item: item[0])
                described = described or " ".join(trailing[n].lstrip("#").strip()
                                                   for n in range(start, end + 1) if n in trailing)
                described = described or _block_above(start, whole)
                if isinstance(key, ast.Constant):
                    setting = f"{setting}[{key.value!r}]"
            described = described or " ".join(
                trailing[n].lstrip("#").strip()
                for n in range(statement.lineno, (statement.end_lineno or statement.lineno) + 1)
                if n in trailing and not inside)
            described = described or _block_above(statement.lineno, whole)
            found[name] = Setting(name, setting, _default(node, source), described, node.lineno)
    return list(found.values())


def settings_table(path: Path | None = None) -> list[Setting]:
    """``read_settings`` of hub/settings.py; ``UndescribedSetting`` names every read without a description."""
    path = path or SETTINGS_PATH
    rows = read_settings(path.read_text())
    missing = [f"{row.variable} (line {row.line})" for row in rows if not row.description]
    if missing:
        raise UndescribedSetting(f"{path.name}: these settings have no description comment (a comment at the end "
                                 f"of the line that reads them, or right above it): {', '.join(missing)}")
    return rows


if __name__ == "__main__":  # python -m hub.manual.settings_doc: the table, or which settings lack a description
    for row in settings_table():
        print(f"{row.variable:32} {row.default[:40]:42} {row.description[:80]}")
