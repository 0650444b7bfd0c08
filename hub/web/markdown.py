"""Model cards to HTML, safely: CommonMark with raw HTML escaped, then an allow-list sanitizer.

Two layers on purpose: markdown-it never passes raw HTML through (``html: False``), and nh3 removes any
tag, attribute or URL scheme outside the allow-list should a rule of the parser ever let one slip. Images
are dropped: a card must not make a reader's browser fetch from elsewhere.
"""

from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_PARSER = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
TAGS = {"a", "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li", "h1", "h2", "h3",
        "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "del"}
ATTRIBUTES = {"a": {"href", "title"}, "th": {"style"}, "td": {"style"}, "ol": {"start"}, "code": {"class"}}
MAX_CHARS = 100_000


def render(text: str) -> SafeString:
    """Markdown -> sanitised HTML; links get ``rel="nofollow noopener noreferrer"``."""
    html = _PARSER.render((text or "")[:MAX_CHARS])
    clean = nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes={"http", "https", "mailto"},
                      link_rel="nofollow noopener noreferrer", filter_style_properties={"text-align"})
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 just above
