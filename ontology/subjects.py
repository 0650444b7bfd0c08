"""Subjects as vocabulary terms: a discipline or subject a user writes, found in the OECD Fields of Science
and Technology (FOS, the Frascati Manual's classification DataCite recommends), so that records carry the
term with its scheme and code, not only the words."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

FOS_SCHEME = "Fields of Science and Technology (FOS)"
FOS_URI = "http://www.oecd.org/science/inno/38235147.pdf"
# The OECD FOS 2007 classification: code -> label.
FOS = {
    "1": "Natural sciences", "1.1": "Mathematics", "1.2": "Computer and information sciences",
    "1.3": "Physical sciences", "1.4": "Chemical sciences", "1.5": "Earth and related environmental sciences",
    "1.6": "Biological sciences", "1.7": "Other natural sciences",
    "2": "Engineering and technology", "2.1": "Civil engineering",
    "2.2": "Electrical engineering, electronic engineering, information engineering", "2.3": "Mechanical engineering",
    "2.4": "Chemical engineering", "2.5": "Materials engineering", "2.6": "Medical engineering",
    "2.7": "Environmental engineering", "2.8": "Environmental biotechnology", "2.9": "Industrial biotechnology",
    "2.10": "Nano-technology", "2.11": "Other engineering and technologies",
    "3": "Medical and health sciences", "3.1": "Basic medicine", "3.2": "Clinical medicine", "3.3": "Health sciences",
    "3.4": "Medical biotechnology", "3.5": "Other medical sciences",
    "4": "Agricultural sciences", "4.1": "Agriculture, forestry, and fisheries", "4.2": "Animal and dairy science",
    "4.3": "Veterinary science", "4.4": "Agricultural biotechnology", "4.5": "Other agricultural sciences",
    "5": "Social sciences", "5.1": "Psychology", "5.2": "Economics and business", "5.3": "Educational sciences",
    "5.4": "Sociology", "5.5": "Law", "5.6": "Political science", "5.7": "Social and economic geography",
    "5.8": "Media and communications", "5.9": "Other social sciences",
    "6": "Humanities", "6.1": "History and archaeology", "6.2": "Languages and literature",
    "6.3": "Philosophy, ethics and religion", "6.4": "Arts (arts, history of arts, performing arts, music)",
    "6.5": "Other humanities",
}
# Names people use for a field whose FOS label words differ.
ALIASES = {"physics": "1.3", "astronomy": "1.3", "astrophysics": "1.3", "chemistry": "1.4", "biology": "1.6",
           "statistics": "1.1", "applied mathematics": "1.1", "computer science": "1.2", "informatics": "1.2",
           "computing": "1.2", "climate science": "1.5", "climatology": "1.5", "geosciences": "1.5",
           "geology": "1.5", "meteorology": "1.5", "oceanography": "1.5", "ecology": "1.6", "genomics": "1.6",
           "bioinformatics": "1.6", "materials science": "2.5", "medicine": "3", "economics": "5.2",
           "linguistics": "6.2", "electrical engineering": "2.2", "engineering": "2"}
_STOP = {"and", "of", "the", "other", "related"}


class Term(NamedTuple):
    label: str
    code: str
    scheme: str = FOS_SCHEME
    scheme_uri: str = FOS_URI


def _words(text: str) -> set[str]:
    return {word.rstrip("s") for word in re.findall(r"[a-z]+", text.lower()) if word not in _STOP}


def fos_term(text: str) -> Term | None:
    """The FOS field ``text`` names ("earth sciences" -> 1.5 Earth and related environmental sciences), by a
    code, a label, a common name, or words all of which are in exactly one label; else None."""
    key = " ".join(text.lower().split())
    if key in FOS:
        return Term(FOS[key], key)
    if key in ALIASES:
        return Term(FOS[ALIASES[key]], ALIASES[key])
    wanted = _words(key)
    if not wanted:
        return None
    found = [code for code, label in FOS.items() if wanted <= _words(label) and not label.startswith("Other")]
    return Term(FOS[found[0]], found[0]) if len(found) == 1 else None


def fields_of_science(meta: dict[str, Any]) -> list[Term]:
    """The FOS fields a record's ``subject`` and ``discipline`` name, once each."""
    out: list[Term] = []
    for name in ("subject", "discipline"):
        term = fos_term(meta[name]) if isinstance(meta.get(name), str) else None
        if term is not None and term.code not in {t.code for t in out}:
            out.append(term)
    return out
