"""How to cite a record: BibTeX, CSL-JSON, RIS, and references formatted in named styles (APA 7th,
Chicago author-date, IEEE, Harvard), what a DOI resolver serves for a DOI. The styles are written here by
hand for the one kind of work the hub holds (no citeproc library is installed)."""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from ontology.record import Record

STYLES = ("apa", "chicago", "ieee", "harvard")
DEFAULT_STYLE = "apa"
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


def _series(items: list[str], last: str, *, serial_comma: bool = True, pair_comma: bool = False) -> str:
    """"A", "A and B", "A, B, and C" (``last`` is the word before the last item, e.g. "and" or "&")."""
    if len(items) <= 1:
        return "".join(items)
    if len(items) == 2:
        return f"{items[0]}{',' if pair_comma else ''} {last} {items[1]}"
    return ", ".join(items[:-1]) + ("," if serial_comma else "") + f" {last} {items[-1]}"


def _stop(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def apa(record: Record) -> str:
    """APA 7th edition: ``Lovelace, A., & Turing, A. (2026). Title (Version 1) [Data set]. Publisher. URL``;
    up to 20 authors, then the first 19, an ellipsis and the last."""
    people = [n.literal or (f"{n.surname}, {n.initials}" if n.initials else n.surname) for n in names(record)]
    authors = (", ".join(people[:19]) + ", . . . " + people[-1]) if len(people) > 20 else \
        _series(people, "&", pair_comma=True)
    version = f" (Version {record.label})" if record.label else ""
    return f"{_stop(authors)} ({record.year}). {record.title}{version} [{GENRES[record.kind]}]. " \
           f"{_stop(record.publisher)} {record.iri}"


def chicago(record: Record) -> str:
    """Chicago author-date (17th): the first author inverted, the others not; more than ten: the first seven
    and "et al."."""
    found = names(record)
    people = [found[0].inverted] + [n.full for n in found[1:]]
    authors = ", ".join(people[:7]) + ", et al" if len(people) > 10 else \
        _series(people, "and", pair_comma=bool(found[0].given))
    version = f" Version {record.label}." if record.label else ""
    return f"{_stop(authors)} {record.year}. {_stop(record.title)}{version} {GENRES[record.kind]}. " \
           f"{_stop(record.publisher)} {record.iri}."


def ieee(record: Record) -> str:
    """IEEE: initials first; more than six authors: the first and "et al."."""
    people = [n.literal or " ".join(p for p in (n.initials, n.surname) if p) for n in names(record)]
    authors = f"{people[0]} et al." if len(people) > 6 else _series(people, "and")
    version = f" Version {record.label}," if record.label else ""
    return f"{authors}, \u201c{record.title},\u201d{version} {record.publisher}, {record.year}. [Online]. " \
           f"Available: {record.iri}"


def harvard(record: Record) -> str:
    """Harvard (Cite Them Right): up to three authors named, four or more: the first and "et al."."""
    people = [n.literal or (f"{n.surname}, {n.initials}" if n.initials else n.surname) for n in names(record)]
    authors = f"{people[0]} et al." if len(people) > 3 else _series(people, "and", serial_comma=False)
    version = f" (Version {record.label})" if record.label else ""
    return f"{authors} ({record.year}) {record.title}{version} [{GENRES[record.kind]}]. " \
           f"{_stop(record.publisher)} Available at: {record.iri}"


FORMATTERS = {"apa": apa, "chicago": chicago, "ieee": ieee, "harvard": harvard}
# Names by which CSL styles and DOI resolvers know these styles.
STYLE_ALIASES = {"apa": "apa", "apa7": "apa", "apa-7th-edition": "apa", "american-psychological-association": "apa",
                 "chicago": "chicago", "chicago-author-date": "chicago", "ieee": "ieee", "harvard": "harvard",
                 "harvard-cite-them-right": "harvard", "harvard1": "harvard"}


def style_name(style: str | None) -> str:
    """The hub's name of ``style`` (e.g. ``apa`` for ``apa-7th-edition``), or ``UnknownStyle``."""
    if not style:
        return DEFAULT_STYLE
    found = STYLE_ALIASES.get(style.strip().lower())
    if found is None:
        raise UnknownStyle(f"No citation style {style!r}; choose one of {', '.join(STYLES)}.")
    return found


def formatted(record: Record, style: str | None = None) -> str:
    """The reference in ``style`` (APA when none is named), one line."""
    return FORMATTERS[style_name(style)](record) + "\n"
