"""Bounded YAML: the hub's depth and size limits hold whatever limits the YAML parser has of its own."""

from __future__ import annotations

import pytest
import yaml

from hub import bounded

DEEP_FLOW = "a: " + "[" * 5000 + "]" * 5000  # past libyaml's own limit (1000 levels in PyYAML >= 6.0.4)
DEEP_BLOCK = "a:\n" + "".join("  " * i + "- \n" for i in range(1, 1200))
JUST_PAST = "[" * 65 + "]" * 65  # past the hub's 64, far within every parser's
WITHIN = "[" * 64 + "]" * 64


@pytest.fixture(params=["libyaml", "pure-python"])
def loader(request, monkeypatch):
    """Each test once with the C parser the hub prefers and once with PyYAML's own."""
    if request.param == "libyaml" and not hasattr(yaml, "CSafeLoader"):
        pytest.skip("this PyYAML has no libyaml")
    monkeypatch.setattr(bounded, "_Loader", yaml.CSafeLoader if request.param == "libyaml" else yaml.SafeLoader)
    return request.param


@pytest.mark.parametrize("text", [DEEP_FLOW, DEEP_BLOCK, JUST_PAST])
def test_deep_yaml_is_the_depth_limit_on_either_parser(loader, text):
    with pytest.raises(bounded.TooDeep, match="nests deeper than 64 levels"):
        bounded.check_yaml(text, 64, 10_000)


def test_depth_at_the_limit_passes_on_either_parser(loader):
    bounded.check_yaml(WITHIN, 64, 10_000)
    with pytest.raises(bounded.TooDeep):
        bounded.check_yaml(WITHIN, 63, 10_000)


def test_a_syntax_error_keeps_the_first_parsers_account(loader):
    text = "title: [unclosed"
    with pytest.raises(yaml.YAMLError) as direct:
        list(yaml.parse(text, Loader=bounded._Loader))
    with pytest.raises(yaml.YAMLError) as caught:
        bounded.check_yaml(text, 64, 10_000)
    assert caught.value is not direct.value and str(caught.value) == str(direct.value)


class _RefusesNesting(yaml.SafeLoader):
    """A stand-in for a parser with a nesting limit of its own below the hub's setting (libyaml's is 1000,
    which the hub's default of 64 never reaches): its scanner refuses the second flow level."""

    def fetch_flow_collection_start(self, TokenClass):
        if self.flow_level >= 1:
            raise yaml.scanner.ScannerError("while increasing flow level", self.get_mark(),
                                             "exceeded maximum nesting depth", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)


def test_a_parsers_own_refusal_of_nesting_is_the_depth_limit(monkeypatch):
    monkeypatch.setattr(bounded, "_Loader", _RefusesNesting)
    bounded.check_yaml("a: [1, 2]", 64, 10_000)  # one level: the stand-in reads it
    with pytest.raises(bounded.TooDeep, match="deeper than the YAML parser reads"):
        bounded.check_yaml("a: [[1], [2]]", 64, 10_000)


def test_load_yaml_reports_the_depth_limit(settings):
    for text in (DEEP_FLOW, DEEP_BLOCK):
        with pytest.raises(bounded.Unreadable, match=r"depth limit exceeded"):
            bounded.load_yaml(text)
