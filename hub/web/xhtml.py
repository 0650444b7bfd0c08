"""A page as XHTML (``application/xhtml+xml``): the HTML the templates render, re-serialised as well-formed
XML in the XHTML namespace, so that a client that asks for XHTML gets the same page an XML parser reads.

Void elements close themselves, character references become characters (escaped where XML needs it),
elements HTML lets a page leave open are closed, and stray end tags are dropped."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from xml.sax.saxutils import escape, quoteattr

XHTML_NS = "http://www.w3.org/1999/xhtml"
MEDIA_TYPE = "application/xhtml+xml"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track",
        "wbr"}
_NAME = re.compile(r"^[A-Za-z_:][A-Za-z0-9_.:-]*$")
# Characters XML 1.0 does not allow anywhere, even as references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class _Writer(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = ['<?xml version="1.0" encoding="utf-8"?>\n']
        self.open: list[str] = []

    def handle_decl(self, decl: str) -> None:
        if decl.lower().startswith("doctype"):
            self.out.append("<!DOCTYPE html>")

    def _tag(self, tag: str, attrs: list[tuple[str, str | None]], close: bool) -> None:
        seen: dict[str, str] = {}
        for name, value in attrs:
            if _NAME.match(name) and name not in seen and name != "xmlns":
                seen[name] = name if value is None else value  # a boolean attribute: checked="checked"
        if tag == "html":
            seen = {"xmlns": XHTML_NS, **seen}
            if "lang" in seen:
                seen["xml:lang"] = seen["lang"]
        text = "".join(f" {name}={quoteattr(_NOT_XML.sub('', value))}" for name, value in seen.items())
        if close or tag in VOID:
            self.out.append(f"<{tag}{text}/>")
        else:
            self.out.append(f"<{tag}{text}>")
            self.open.append(tag)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if _NAME.match(tag):
            self._tag(tag, attrs, close=False)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if _NAME.match(tag):
            self._tag(tag, attrs, close=True)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID or tag not in self.open:
            return
        while self.open:
            inner = self.open.pop()
            self.out.append(f"</{inner}>")
            if inner == tag:
                break

    def handle_data(self, data: str) -> None:
        self.out.append(escape(_NOT_XML.sub("", data)))

    def handle_comment(self, data: str) -> None:
        self.out.append("<!--" + data.replace("--", "- -").rstrip("-") + "-->")

    def close(self) -> None:
        super().close()
        while self.open:
            self.out.append(f"</{self.open.pop()}>")


def to_xhtml(html: str) -> str:
    """``html`` as a well-formed XHTML document."""
    writer = _Writer()
    writer.feed(html)
    writer.close()
    return "".join(writer.out)
