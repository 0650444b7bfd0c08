"""A model family is one row of ``hpcfair.convert.families.FAMILIES`` and the module its ``export`` names (issue
60, point 3): a toy family registered here and nowhere else is recognised by its suffix and by its first bytes,
described by the hub's metadata derivation, converted and verified by the converter. And no other table of the
converter or the hub spells the families: the source is read with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hpcfair.convert import core, families, formats

from hub.metadata.derive import FileInfo, derive
from tests.conversions import toy_family

ROOT = Path(__file__).resolve().parents[2]
TOY = families.Family("toy", "Toy (.toy)", "toylib", (".toy",), head=lambda head: head.startswith(toy_family.MAGIC),
                      export="tests.conversions.toy_family:export_toy")


@pytest.fixture
def toy(monkeypatch) -> families.Family:
    monkeypatch.setitem(families.FAMILIES, TOY.name, TOY)
    return TOY


def test_a_family_added_in_one_row_is_recognised_described_and_converted(toy, tmp_path):
    named = toy_family.write(tmp_path / "scaler.toy", 2.5)
    unnamed = toy_family.write(tmp_path / "scaler.ckpt", 2.5)  # a name that says nothing: the bytes do
    assert formats.detect(named) == formats.detect(unnamed) == "toy"
    assert formats.looks_like_model("scaler.toy") and "Toy (.toy)" in families.known()

    facts = derive("model", [FileInfo("scaler.toy", named, named.stat().st_size)])
    assert (facts["format"], facts["framework"]) == ("toy", "other")  # toylib is no framework of the ontology

    report = core.convert(named, tmp_path / "scaler.onnx")  # what the sandbox's child runs
    assert report["source_format"] == "toy" and report["framework"] == "toylib" and report["converted"]
    assert report["converter"] == "toy multiply" and report["verification"]["passed"]
    assert report["inputs"][0]["name"] == "X" and (tmp_path / "scaler.onnx").is_file()


def test_older_spellings_are_read_as_todays():
    """Conversion reports written before the one vocabulary say keras_h5, torch_export, tf_savedmodel, sklearn."""
    assert [families.family(old).name for old in ("keras_h5", "torch_export", "tf_savedmodel", "sklearn")] == [
        "keras-h5", "torch-export", "savedmodel", "pickle"]
    assert families.family("keras-h5") is families.FAMILIES["keras-h5"] and families.family("nope") is None


# Collections that spell two or more families outside families.py, in the converter, the workers and the hub, and
# why each may: a config's backend words (which share some spellings), the words that make a .json a booster's.
ALLOWED = {("client/hpcfair/convert/formats.py", "BACKENDS"), ("client/hpcfair/convert/formats.py", "BOOSTER_WORDS")}


def family_tables() -> set[tuple[str, str]]:
    names = set(families.FAMILIES) | set(families.OLD_NAMES)
    found = set()
    for path in [*ROOT.glob("hub/**/*.py"), *ROOT.glob("workers/**/*.py"), *ROOT.glob("client/hpcfair/convert/*.py")]:
        if path.name == "families.py":
            continue
        tree = ast.parse(path.read_text())
        for statement in ast.walk(tree):
            where = statement.targets[0] if isinstance(statement, ast.Assign) else None
            label = ast.unparse(where) if where is not None else f"line {getattr(statement, 'lineno', '?')}"
            for node in ast.walk(statement) if isinstance(statement, ast.Assign | ast.Compare | ast.Return) else ():
                items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
                if len({i.value for i in items if isinstance(i, ast.Constant) and i.value in names}) >= 2:
                    found.add((str(path.relative_to(ROOT)), label))
    return found


@pytest.mark.slow
@pytest.mark.cpu  # reads the whole tree: over 1 s on a quiet machine
def test_no_other_table_of_the_converter_or_the_hub_spells_the_families():
    assert family_tables() <= ALLOWED
