"""Citations (issue 40, point 4): names split into family and given, BibTeX keys from the family name,
CSL-JSON checked against CSL's data schema rules, RIS read back by a strict RIS reader, and references in
any CSL style (APA 7th, Chicago author-date, IEEE, Harvard, …) rendered by citeproc-py from the style files."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
import rispy

from ontology import citations, exports
from ontology.citations import Name, split_name
from tests.metadata.test_exports import BASE, dataset_record, model_record

SCHEMAS = Path(__file__).parent / "schemas"
# CSL-JSON's own input schema, CSL 1.0.2 (tests/metadata/schemas/README.md)
CSL_DATA = json.loads((SCHEMAS / "csl-data-1.0.2.json").read_text())
RIS_LINE = re.compile(r"^([A-Z][A-Z0-9])  - (.*)$")
RIS_TYPES = {"COMP", "DATA", "GEN", "ELEC"}


def read_ris(text: str) -> list[dict[str, list[str]]]:
    """A strict RIS reader: CRLF lines ``TAG  - value``, each record from ``TY`` to ``ER``."""
    assert text.endswith("\r\n") and "\n" not in text.replace("\r\n", "")
    records, current = [], None
    for line in text.split("\r\n")[:-1]:
        match = RIS_LINE.match(line)
        assert match, line
        tag, value = match.groups()
        if tag == "TY":
            assert current is None and value in RIS_TYPES
            current = {}
        assert current is not None, f"{tag} before TY"
        if tag == "ER":
            records.append(current)
            current = None
        else:
            current.setdefault(tag, []).append(value)
    assert current is None, "no ER"
    return records


def read_bibtex(text: str) -> tuple[str, str, dict[str, str]]:
    """(entry type, key, fields) of one BibTeX entry, braces balanced in every value."""
    match = re.fullmatch(r"@(\w+)\{([^,\s]+),\n(.*)\n\}\n", text, re.S)
    assert match, text
    fields = {}
    for line in match.group(3).split(",\n"):
        name, _, value = line.strip().partition(" = ")
        assert value.startswith("{") and value.endswith("}"), line
        depth = 0
        for char in re.sub(r"\\[{}]", "", value):
            depth += {"{": 1, "}": -1}.get(char, 0)
            assert depth >= 0, line
        assert depth == 0, line
        fields[name] = value[1:-1]
    return match.group(1), match.group(2), fields


def with_creators(*creators, kind: str = "model"):
    record = model_record() if kind == "model" else dataset_record()
    return replace(record, metadata={**record.metadata,
                                     "creators": [c if isinstance(c, dict) else {"name": c} for c in creators]})


@pytest.mark.parametrize(("agent", "name"), [
    ({"name": "Ada Lovelace"}, Name("Lovelace", "Ada")),
    ({"name": "Lovelace, Ada"}, Name("Lovelace", "Ada")),
    ({"name": "Ada Augusta King"}, Name("King", "Ada Augusta")),
    ({"name": "Guido van Rossum"}, Name("Rossum", "Guido", "van")),
    ({"name": "van Rossum, Guido"}, Name("Rossum", "Guido", "van")),
    ({"name": "Plato"}, Name("Plato")),
    ({"name": "Oak Ridge National Laboratory", "type": "organization"}, Name(literal="Oak Ridge National Laboratory")),
])
def test_names_split_into_family_and_given(agent, name):
    assert split_name(agent) == name


def test_the_bibtex_key_is_the_family_name_and_year_whatever_order_the_name_is_written_in():
    for written in ("Ada Lovelace", "Lovelace, Ada"):
        kind, key, fields = read_bibtex(exports.export(with_creators(written, "Alan Turing"), "bibtex"))
        assert kind == "misc" and key == "lovelace2026fk4model1"  # never "ada…"
        assert fields["author"] == "Lovelace, Ada and Turing, Alan" and fields["year"] == "2026"
    _, key, fields = read_bibtex(exports.export(with_creators(
        {"name": "Oak Ridge National Laboratory", "type": "organization"}, "Kurt Gödel"), "bibtex"))
    assert key == "oak2026fk4model1" and fields["author"] == "{Oak Ridge National Laboratory} and Gödel, Kurt"
    _, _, fields = read_bibtex(exports.export(with_creators("A. N. Other"), "bibtex"))
    assert fields["title"] == "{Cloud mask CNN}" and fields["url"] == f"{BASE}/ark:/99999/fk4model1"


def test_csl_json_follows_the_csl_data_schema():
    for record, kind in ((model_record(), "software"), (dataset_record(), "dataset")):
        item = json.loads(exports.export(record, "csl-json"))
        jsonschema.Draft7Validator(CSL_DATA, format_checker=jsonschema.FormatChecker()).validate([item])
        assert item["type"] == kind and item["id"] == record.pid and item["URL"] == record.iri
    item = json.loads(exports.export(with_creators("Guido van Rossum", {"name": "OLCF", "type": "organization"}),
                                     "csl-json"))
    assert item["author"] == [{"family": "Rossum", "given": "Guido", "non-dropping-particle": "van"},
                              {"literal": "OLCF"}]
    assert item["issued"] == {"date-parts": [[2026, 3, 4]]} and item["version"] == "1-onnx"
    assert item["keyword"] == "climate, cnn" and item["abstract"] == "Segments clouds."


def test_ris_reads_back():
    text = exports.export(model_record(), "ris")
    assert text.startswith("TY  - COMP\r\n") and text.endswith("ER  - \r\n")
    [record] = read_ris(text)
    assert record["AU"] == ["Lovelace, Ada", "Turing, Alan"] and record["TI"] == ["Cloud mask CNN"]
    assert record["PY"] == ["2026"] and record["DA"] == ["2026/03/04/"] and record["ET"] == ["1-onnx"]
    assert record["UR"] == [f"{BASE}/ark:/99999/fk4model1"] and record["KW"] == ["climate", "cnn"]
    multi = replace(dataset_record(), metadata={**dataset_record().metadata, "description": "Two\nlines."})
    text = exports.export(multi, "ris")
    assert text.startswith("TY  - DATA\r\n") and read_ris(text)[0]["AB"] == ["Two lines."]


def test_ris_reads_back_with_rispy():
    """The RIS reader reference managers' Python tools use, strict about its tags (``enforce_list_tags``)."""
    [model] = rispy.loads(exports.export(model_record(), "ris"), enforce_list_tags=True)
    assert model["type_of_reference"] == "COMP" and model["authors"] == ["Lovelace, Ada", "Turing, Alan"]
    assert model["title"] == "Cloud mask CNN" and model["year"] == "2026" and model["edition"] == "1-onnx"
    assert model["urls"] == [f"{BASE}/ark:/99999/fk4model1"] and model["keywords"] == ["climate", "cnn"]
    assert model["notes"] == ["ARK: ark:/99999/fk4model1"] and "unknown_tag" not in model
    [data] = rispy.loads(exports.export(dataset_record(), "ris"))
    assert data["type_of_reference"] == "DATA" and data["type_of_work"] == "Data set"


MODEL_URL = f"{BASE}/ark:/99999/fk4model1"


@pytest.mark.parametrize(("style", "expected"), [
    ("apa", "Lovelace, A., & Turing, A. (2026). Cloud mask CNN (Version 1-onnx) [Machine learning model]. "
            f"HPCFair Hub. {MODEL_URL}"),
    # Chicago keeps given names whole (CSL 1.0.1's initialize="false", which citeproc-py is taught here)
    ("chicago-author-date", "Lovelace, Ada, and Alan Turing. 2026. Cloud Mask CNN. Machine learning model. "
                            f"V. 1-onnx. HPCFair Hub, released March 4. {MODEL_URL}."),
    ("ieee", "[1]A. Lovelace and A. Turing, Cloud mask CNN. (Mar. 04, 2026). Machine learning model. HPCFair Hub. "
             f"[Online]. Available: {MODEL_URL}"),
    ("harvard-cite-them-right", f"Lovelace, A. and Turing, A. (2026) \u201cCloud mask CNN\u201d. HPCFair Hub. "
                                f"Available at: {MODEL_URL}."),
])
def test_the_page_styles_from_their_csl_files(style, expected):
    assert exports.export(model_record(), "citation", style) == expected + "\n"
    assert citations.formatted(model_record(), style.upper()) == expected + "\n"  # names in any case


def test_short_names_and_any_csl_style():
    record = model_record()
    for short, name in (("chicago", "chicago-author-date"), ("harvard", "harvard-cite-them-right"),
                        ("apa-7th-edition", "apa"), ("", "apa"), (None, "apa")):
        assert citations.style_name(short) == name
        assert citations.formatted(record, short) == citations.formatted(record, name)
    # any style of the CSL repository, dependent styles (which name their parent) included
    assert citations.formatted(record, "nature") == "1.Lovelace, A. & Turing, A. Cloud mask CNN. HPCFair Hub (2026).\n"
    assert citations.formatted(record, "modern-language-association").startswith(
        "Lovelace, Ada, and Alan Turing. Cloud Mask CNN. Machine learning model. Version 1-onnx, HPCFair Hub, "
        "4 Mar. 2026")
    assert citations.formatted(record, "proceedings-of-the-ieee") == citations.formatted(record, "ieee")


def test_apa_author_lists():
    def authors(*creators, kind="model"):
        return citations.formatted(with_creators(*creators, kind=kind), "apa").split(" (2026)")[0]

    assert authors("Ada Lovelace") == "Lovelace, A."
    assert authors("Jean-Paul Sartre", "Ada Augusta King") == "Sartre, J.-P., & King, A. A."
    assert authors("Ada Lovelace", "Alan Turing", "Grace Hopper") == "Lovelace, A., Turing, A., & Hopper, G."
    assert authors("Guido van Rossum") == "van Rossum, G."
    assert authors({"name": "Oak Ridge National Laboratory", "type": "organization"}) == \
        "Oak Ridge National Laboratory."
    many = authors(*(f"Given Family{i}" for i in range(25)))  # APA 7: the first 19, an ellipsis, the last
    assert many.startswith("Family0, G., Family1, G.,") and many.endswith("Family18, G., \u2026 Family24, G.")
    assert many.count("Family") == 20
    assert "[Data set]" in citations.formatted(with_creators("Ada Lovelace", kind="dataset"), "apa")


def test_long_author_lists_in_the_other_styles():
    people = [f"Given Family{i}" for i in range(12)]

    def reference(style, count):
        return citations.formatted(with_creators(*people[:count]), style)

    assert reference("ieee", 12).startswith("[1]G. Family0 et al., ")  # more than six: the first and et al.
    assert reference("ieee", 6).startswith("[1]G. Family0, G. Family1, G. Family2, G. Family3, G. Family4, and "
                                           "G. Family5, ")
    assert reference("harvard", 4).startswith("Family0, G. et al. (2026)")
    assert reference("harvard", 3).startswith("Family0, G., Family1, G. and Family2, G. (2026)")
    assert reference("chicago", 12).startswith("Family0, Given, Given Family1, Given Family2, et al. 2026.")


@pytest.mark.parametrize("style", ["vancouver-superscript-x", "../styles/apa", "apa.csl", "dependent/jaapa", "a" * 200])
def test_a_style_the_csl_repository_lacks_is_refused(style):
    with pytest.raises(citations.UnknownStyle, match="CSL styles repository"):
        exports.export(model_record(), "citation", style)


@pytest.mark.slow
@pytest.mark.cpu  # renders every style: over 1 s on a quiet machine
def test_references_rendered_at_once_in_threads_are_each_their_own_styles():
    """Web threads render at once: each reference is its style's, whatever the others render meanwhile (the
    kept references and citeproc-py's macro look-up are per style)."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(with_creators(f"Given Family{i}", kind="dataset" if i % 2 else "model"), style)
            for i in range(6) for style in ("apa", "ieee", "chicago", "nature", "harvard")]
    expected = [citations.formatted(record, style) for record, style in jobs]
    citations._render.cache_clear()
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(lambda job: citations.formatted(*job), jobs)) == expected
    assert len(set(expected)) == len(jobs)
