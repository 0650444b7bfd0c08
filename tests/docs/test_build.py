"""The strict build of the manual (issue 56): it passes, its generated reference pages have an entry for every
setting, code, export format, API path and CLI command of the code, its links and anchors resolve, nothing it
shows is fetched from off the host, and a setting without a description stops it."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.docs.conftest import ROOT, text_of

pytestmark = [pytest.mark.slow, pytest.mark.cpu]


def shown(text: str) -> str:
    """A docstring or help text as the page shows it: one line, its ``literals`` set as code (no backticks)."""
    return " ".join(text.replace("``", "").split())


def test_every_setting_settings_py_reads_has_a_row(built_manual):
    source = (ROOT / "hub" / "settings.py").read_text()
    read = set(re.findall(r"""\benv(?:_bool|_list)?\(\s*["']([A-Z0-9_]+)["']""", source))
    read |= set(re.findall(r"""os\.environ(?:\.get\(|\[)\s*["']([A-Z0-9_]+)["']""", source))
    page = text_of(built_manual, "reference/configuration")
    assert len(read) > 100
    assert not sorted(name for name in read if f"{name} " not in page and f"{name}\n" not in page)


def test_every_error_code_has_a_row(built_manual):
    from hpcfair.compute import JOB_CODES

    from hub.errors import STATUS

    http = text_of(built_manual, "reference/http-errors")
    assert not [code for code, status in STATUS.items() if not re.search(rf"\b{code}\s*\n?\s*{status} ", http)]
    jobs = text_of(built_manual, "reference/job-errors")
    assert not [code for code, words in JOB_CODES.items() if code not in jobs or " ".join(words.split()) not in jobs]


def test_every_export_format_has_a_row(built_manual):
    from ontology.exports import FORMATS

    page = text_of(built_manual, "reference/export-formats")
    assert not [name for name, found in FORMATS.items()
                if not re.search(rf"{re.escape(name)}\s+{re.escape(found.media_type)}", page)]


def test_every_api_path_and_operation_is_listed(built_manual, client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    page = text_of(built_manual, "reference/rest-api")
    operations = [operation["operationId"] for item in schema["paths"].values() for operation in item.values()
                  if isinstance(operation, dict) and "operationId" in operation]
    assert len(operations) > 30
    assert not [path for path in schema["paths"] if path not in page]
    assert not [name for name in operations if f"({name})" not in page]


def test_every_cli_command_has_its_help(built_manual):
    import typer.main
    from hpcfair.cli import app

    root = typer.main.get_command(app)
    page = text_of(built_manual, "reference/cli")
    commands = [(f"hpcfair {name}", command) for name, command in root.commands.items()]
    commands += [(f"hpcfair {group} {name}", command) for group, sub in root.commands.items()
                 for name, command in getattr(sub, "commands", {}).items()]
    assert len(commands) > 10
    for name, command in commands:
        assert f"\n{name}\n" in page or f"\n{name} " in page, name
        assert shown(command.help) in " ".join(page.split()), name
        for param in command.params:
            if param.name != "help":
                assert param.opts[0] in page or param.human_readable_name in page, (name, param.name)


def test_the_python_client_is_documented_from_its_docstrings(built_manual):
    from hpcfair.api import modelAPI
    from hpcfair.client import HubClient

    page = text_of(built_manual, "reference/python-client")
    for cls, method in ((modelAPI, "conversion"), (modelAPI, "finetune"), (HubClient, "publish"),
                        (HubClient, "wait")):
        first = shown(getattr(cls, method).__doc__.strip().split("\n")[0])
        assert first in " ".join(page.split()), (cls.__name__, method, first)


class Links(HTMLParser):
    """Every link and every loaded resource of a page, and its ids."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.loads: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"])
        if tag == "a" and found.get("href"):
            self.links.append(found["href"])
        if tag in {"script", "img", "iframe", "source", "audio", "video", "embed"} and found.get("src"):
            self.loads.append(found["src"])
        if tag == "link" and found.get("href"):
            self.loads.append(found["href"])  # stylesheets, icons, preloads, manifests: a browser fetches them
        if tag == "object" and found.get("data"):
            self.loads.append(found["data"])


def parsed(path: Path) -> Links:
    links = Links()
    links.feed(path.read_text())
    return links


def off_host(url: str) -> bool:
    return bool(urlparse(url).scheme in {"http", "https"} or url.startswith("//"))


def test_every_internal_link_and_anchor_resolves(built_manual):
    # 404.html is mkdocs serve's (its links are from the site's root); the hub answers its own 404 at /docs/
    pages = {path: parsed(path) for path in built_manual.rglob("*.html") if path.name != "404.html"}
    broken = []
    for path, links in pages.items():
        for href in links.links:
            if off_host(href) or href.startswith(("mailto:", "javascript:")):
                continue
            target, _, anchor = href.partition("#")
            file = (path.parent / unquote(target)).resolve() if target else path
            if file.is_dir():
                file = file / "index.html"
            if not file.is_file():
                broken.append(f"{path.relative_to(built_manual)}: {href}")
            elif anchor and file.suffix == ".html" and anchor not in pages[file].ids:
                broken.append(f"{path.relative_to(built_manual)}: {href} (no such anchor)")
    assert len(pages) > 30
    assert not broken, broken[:20]


def test_nothing_is_loaded_from_off_the_host(built_manual):
    outside = [f"{path.relative_to(built_manual)}: {url}" for path in built_manual.rglob("*.html")
               for url in parsed(path).loads if off_host(url)]
    for sheet in built_manual.rglob("*.css"):
        text = sheet.read_text()
        outside += [f"{sheet.name}: {url}" for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", text) if off_host(url)]
        outside += [f"{sheet.name}: @import {url}" for url in re.findall(r"@import\s+['\"]?([^'\";]+)", text)]
    scripts = " ".join(path.read_text() for path in built_manual.rglob("*.js"))
    assert "fonts.googleapis.com" not in scripts and "fonts.gstatic.com" not in scripts
    assert not outside, outside[:20]
    home = (built_manual / "index.html").read_text()
    assert "fonts.googleapis" not in home and "squidfunk.github.io" not in home  # theme.font and generator off


def test_the_readme_links_into_pages_that_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    targets = re.findall(r"\]\(((?:docs/)[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(targets) > 20
    assert not [target for target in targets if not (ROOT / target).is_file()]


def test_a_setting_without_a_description_stops_the_build(tmp_path, monkeypatch):
    """The build itself, in this process, on a copy of settings.py whose HUB_OAI_PAGE_SIZE lost its comment."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    from hub.manual import settings_doc

    source = (ROOT / "hub" / "settings.py").read_text()
    line = next(line for line in source.splitlines() if 'env("HUB_OAI_PAGE_SIZE"' in line)
    assert "  # " in line
    copy = tmp_path / "settings.py"
    copy.write_text(source.replace(line, line.split("  # ")[0]))
    monkeypatch.setattr(settings_doc, "SETTINGS_PATH", copy)
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path / "site"))
    with pytest.raises(Abort) as refused:
        build(config)
    chain, error = [], refused.value
    while error is not None:  # mkdocs logs the plugin's error and raises Abort from it
        chain.append(str(error))
        error = error.__cause__ or error.__context__
    message = next(text for text in chain if "reference cannot be made" in text)
    assert "HUB_OAI_PAGE_SIZE" in message and "no description" in message
    # that one and no other: every other setting has its description
    assert message.count("(line ") == 1, message
