"""The reference pages' tables, made from the code at build time (``hub.manual.hook`` puts them into the pages).

Each generator returns Markdown. Nothing here is kept by hand: a new setting, error code, export format, API
operation or CLI command is in the next build, and one without the words its table needs stops the build
(``MissingEntry``)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from hub.manual import settings_doc

ROOT = Path(__file__).resolve().parents[2]
ERRORS_PATH = ROOT / "hub" / "errors.py"
CONFIG_SCHEMA_PATH = ROOT / "client" / "hpcfair" / "config.schema.json"
METHODS = ("get", "put", "post", "patch", "delete", "head", "options")


class MissingEntry(ValueError):
    """The code lacks what a reference table needs (a description, a help text)."""


def cell(text: Any) -> str:
    """One Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: Any) -> str:
    text = cell(text)
    return f"`{text}`" if text else ""


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def configuration() -> str:
    """Every environment variable hub/settings.py reads: default, the Django setting it feeds, description."""
    try:
        rows = settings_doc.settings_table()
    except settings_doc.UndescribedSetting as error:
        raise MissingEntry(str(error)) from error
    return table(["variable", "default", "setting", "what it does"],
                 [[code(row.variable), code(row.default) or "(empty)", code(row.setting), cell(row.description)]
                  for row in rows])


def _status_table(source: str) -> list[tuple[str, int, str]]:
    """hub.errors.STATUS read from the source (code, status, the comment at the end of its line)."""
    trailing, _ = settings_doc.comments(source)
    for node in ast.parse(source).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "STATUS" and isinstance(node.value, ast.Dict):
            return [(key.value, value.value, trailing.get(key.lineno, "").lstrip("#").strip())
                    for key, value in zip(node.value.keys, node.value.values, strict=True)]
    raise MissingEntry(f"{ERRORS_PATH.name} has no STATUS table")


def http_errors() -> str:
    """The HTTP error codes (``hub.errors.STATUS``) by status."""
    rows = sorted(_status_table(ERRORS_PATH.read_text()), key=lambda row: (row[1], row[0]))
    if not any(note for _, _, note in rows):  # a note is the comment at the end of a code's line in STATUS
        return table(["code", "HTTP status"], [[code(name), f"{status} {HTTPStatus(status).phrase}"]
                                               for name, status, _ in rows])
    return table(["code", "HTTP status", "note"],
                 [[code(name), f"{status} {HTTPStatus(status).phrase}", cell(note)] for name, status, note in rows])


def job_errors() -> str:
    """The codes a job may end with (``hpcfair.compute.JOB_CODES``) and what each says."""
    from hpcfair.compute import JOB_CODES

    missing = [name for name, words in JOB_CODES.items() if not str(words).strip()]
    if missing:
        raise MissingEntry(f"JOB_CODES entries without a description: {', '.join(missing)}")
    return table(["code", "the job"], [[code(name), cell(words)] for name, words in JOB_CODES.items()])


def export_formats() -> str:
    """``ontology.exports``: each format's name, media type, profile and the kinds it is made for."""
    from ontology import exports

    return table(["format", "media type", "profile", "kinds"],
                 [[code(name), code(found.media_type), code(found.profile),
                   cell("every kind" if found.kinds == exports.KINDS else ", ".join(sorted(found.kinds)))]
                  for name, found in exports.FORMATS.items()])


def openapi_schema() -> dict[str, Any]:
    """The OpenAPI schema, as ``manage.py spectacular`` writes it (in a child, on a throwaway var dir)."""
    with tempfile.TemporaryDirectory() as var:
        env = {**os.environ, "HUB_VAR_DIR": var, "DJANGO_SETTINGS_MODULE": "hub.settings"}
        env.pop("DATABASE_URL", None)
        done = subprocess.run([sys.executable, "manage.py", "spectacular", "--format", "openapi-json",
                               "--file", f"{var}/schema.json"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        if done.returncode:
            raise MissingEntry(f"manage.py spectacular failed: {done.stderr[-2000:]}")
        return json.loads(Path(var, "schema.json").read_text())


def rest_api(schema: dict[str, Any] | None = None) -> str:
    """Every operation of the OpenAPI schema: method, path, summary, the success and error statuses."""
    schema = schema or openapi_schema()
    out: list[str] = []
    for path, item in schema["paths"].items():
        out.append(f"### `{path}`\n")
        for method in METHODS:
            operation = item.get(method)
            if not operation:
                continue
            words = operation.get("summary") or operation.get("description", "").strip().split("\n\n")[0]
            statuses = ", ".join(sorted(operation.get("responses", {})))
            params = ", ".join(f"`{p['name']}`" for p in operation.get("parameters", []) if p.get("in") == "query")
            out.append(f"- **{method.upper()}** ({code(operation.get('operationId', ''))}): {cell(words) or '-'}"
                       + (f" Query: {params}." if params else "") + f" Answers: {statuses}.")
        out.append("")
    return "\n".join(out)


def _cli_commands() -> list[tuple[str, Any]]:
    import typer.main
    from hpcfair.cli import app

    root = typer.main.get_command(app)
    found: list[tuple[str, Any]] = [("hpcfair", root)]

    def walk(prefix: str, group: Any) -> None:
        for name in sorted(getattr(group, "commands", {})):
            command = group.commands[name]
            found.append((f"{prefix} {name}", command))
            walk(f"{prefix} {name}", command)

    walk("hpcfair", root)
    return found


def cli() -> str:
    """Each ``hpcfair`` command from its own help: usage, help, options and arguments, example."""
    import click

    out: list[str] = []
    missing: list[str] = []
    for name, command in _cli_commands():
        context = click.Context(command, info_name=name)
        usage = " ".join(command.collect_usage_pieces(context))
        words = (command.help or "").strip()
        if not words:
            missing.append(name)
        out += [f"### `{name}`\n", f"```text\n{name} {usage}\n```\n", cell(words) + "\n"]
        rows = []
        for param in command.params:
            if param.name == "help":
                continue
            record = param.get_help_record(context)
            if isinstance(param, click.Argument):
                rows.append([code(param.human_readable_name), cell(getattr(param, "help", "") or "")])
            elif record:
                rows.append([code(record[0]), cell(record[1])])
        if rows:
            out.append(table(["argument or option", "what it is"], rows))
        if command.epilog:
            out.append(cell(command.epilog) + "\n")
    if missing:
        raise MissingEntry(f"hpcfair commands without help text: {', '.join(missing)}")
    return "\n".join(out)


def config_schema() -> str:
    """The task config's groups and keys, from client/hpcfair/config.schema.json."""
    schema = json.loads(CONFIG_SCHEMA_PATH.read_text())
    out: list[str] = [cell(schema.get("description", "")) + "\n"]
    for group, ref in schema["properties"].items():
        definition = schema["$defs"][ref["$ref"].rsplit("/", 1)[-1]]
        required = " (required)" if group in schema.get("required", []) else ""
        out.append(f"### `{group}`{required}\n\n{cell(definition.get('description', ''))}\n")
        rows = []
        for key, spec in definition.get("properties", {}).items():
            kinds = spec.get("type") or " or ".join(
                str(option.get("type", option.get("$ref", "")).rsplit("/", 1)[-1]) for option in spec.get("anyOf", []))
            default = code(json.dumps(spec["default"])) if "default" in spec else ""
            rows.append([code(key), cell(kinds if isinstance(kinds, str) else " or ".join(kinds)), default,
                         cell(spec.get("description", ""))])
        if rows:
            out.append(table(["key", "type", "default", "what it is"], rows))
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "configuration": configuration,
    "http-errors": http_errors,
    "job-errors": job_errors,
    "export-formats": export_formats,
    "rest-api": rest_api,
    "cli": cli,
    "config-schema": config_schema,
}
