"""Citations (issue 40, point 4): names split into family and given, BibTeX keys from the family name,
CSL-JSON checked against CSL's data schema rules, RIS read back by a strict RIS reader, and references in
APA 7th, Chicago author-date, IEEE and Harvard."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import jsonschema
import pytest

from ontology import citations, exports
from ontology.citations import Name, split_name
from tests.metadata.test_exports import BASE, dataset_record, model_record

# CSL-JSON's input schema (citation-style-language/schema, csl-data.json), written down here for the item
# properties the hub writes: an item has a type from CSL's list and an id, names are objects of name parts,
# dates are date-parts of one or two [year, month, day] arrays, and nothing outside CSL's variables.
CSL_NAME = {"type": "object", "additionalProperties": False, "properties": {
    key: {"type": "string"} for key in ("family", "given", "dropping-particle", "non-dropping-particle", "suffix",
                                        "literal")}}
CSL_DATE = {"type": "object", "additionalProperties": False, "properties": {"date-parts": {
    "type": "array", "minItems": 1, "maxItems": 2,
    "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": ["string", "number"]}}}}}
CSL_ITEM = {
    "type": "object", "required": ["type", "id"], "additionalProperties": False,
    "properties": {
        "type": {"enum": ["article", "book", "dataset", "document", "software", "report", "webpage"]},
        "id": {"type": ["string", "number"]}, "author": {"type": "array", "items": CSL_NAME},
        "contributor": {"type": "array", "items": CSL_NAME}, "issued": CSL_DATE, "accessed": CSL_DATE,
        **{key: {"type": "string"} for key in ("title", "publisher", "URL", "DOI", "genre", "note", "version",
                                               "abstract", "keyword", "language", "medium", "status")},
    },
}
CSL_DATA = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": CSL_ITEM}
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
        jsonschema.validate([item], CSL_DATA)
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


MODEL_URL = f"{BASE}/ark:/99999/fk4model1"


@pytest.mark.parametrize(("style", "expected"), [
    ("apa", "Lovelace, A., & Turing, A. (2026). Cloud mask CNN (Version 1-onnx) [Machine learning model]. "
            f"HPCFair Hub. {MODEL_URL}"),
    ("chicago", "Lovelace, Ada, and Alan Turing. 2026. Cloud mask CNN. Version 1-onnx. Machine learning model. "
                f"HPCFair Hub. {MODEL_URL}."),
    ("ieee", "A. Lovelace and A. Turing, \u201cCloud mask CNN,\u201d Version 1-onnx, HPCFair Hub, 2026. [Online]. "
             f"Available: {MODEL_URL}"),
    ("harvard", "Lovelace, A. and Turing, A. (2026) Cloud mask CNN (Version 1-onnx) [Machine learning model]. "
                f"HPCFair Hub. Available at: {MODEL_URL}"),
])
def test_each_named_style(style, expected):
    assert exports.export(model_record(), "citation", style) == expected + "\n"
    assert citations.formatted(model_record(), style.upper()) == expected + "\n"  # names in any case


def test_apa_author_lists():
    def authors(*creators, kind="model"):
        return citations.apa(with_creators(*creators, kind=kind)).split(" (2026)")[0]

    assert authors("Ada Lovelace") == "Lovelace, A."
    assert authors("Jean-Paul Sartre", "Ada Augusta King") == "Sartre, J.-P., & King, A. A."
    assert authors("Ada Lovelace", "Alan Turing", "Grace Hopper") == "Lovelace, A., Turing, A., & Hopper, G."
    assert authors({"name": "Oak Ridge National Laboratory", "type": "organization"}) == \
        "Oak Ridge National Laboratory."
    many = authors(*(f"Given Family{i}" for i in range(25)))
    assert many.startswith("Family0, G., Family1, G.,") and many.endswith(", . . . Family24, G.")
    assert many.count("Family") == 20
    assert "[Data set]" in citations.apa(with_creators("Ada Lovelace", kind="dataset"))


def test_long_author_lists_in_the_other_styles():
    people = [f"Given Family{i}" for i in range(12)]
    assert citations.ieee(with_creators(*people)).startswith("G. Family0 et al., ")
    assert citations.harvard(with_creators(*people[:4])).startswith("Family0, G. et al. (2026)")
    assert citations.harvard(with_creators(*people[:3])).startswith("Family0, G., Family1, G. and Family2, G. (2026)")
    assert citations.chicago(with_creators(*people)).startswith(
        "Family0, Given, Given Family1, Given Family2, Given Family3, Given Family4, Given Family5, Given Family6, "
        "et al. 2026.")


def test_an_unknown_style_is_refused_and_aliases_are_known():
    with pytest.raises(citations.UnknownStyle, match="apa, chicago, ieee, harvard"):
        exports.export(model_record(), "citation", "mla")
    assert citations.style_name("apa-7th-edition") == "apa" and citations.style_name("") == "apa"
    assert citations.style_name("chicago-author-date") == "chicago"
