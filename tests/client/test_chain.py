"""The one chain rule (``hpcfair.chain``): explicit links, else by position. The client, the workers and the
hub's link check all use it; their ends are tested in tests/gateway/test_collaborate.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hpcfair import chain

ROOT = Path(__file__).resolve().parents[2]


def test_by_position_the_first_output_feeds_the_first_input():
    assert chain.joint({}, ["y", "z"], ["a", "b"]) == [("a", "y"), ("b", "z")]
    assert chain.joint(None, ["y"], ["x"]) == [("x", "y")]


def test_a_link_says_everything():
    assert chain.joint({"b": "y", "a": "z"}, ["y", "z"], ["a", "b"]) == [("b", "y"), ("a", "z")]
    assert chain.joint({"a": "y"}, ["y", "z"], ["a"]) == [("a", "y")]  # an output may go unused


@pytest.mark.parametrize(("link", "outputs", "inputs", "reason", "words"), [
    ({}, ["y", "z"], ["a"], "count", "say which feeds which in the link"),
    ({"c": "y"}, ["y"], ["a"], "unknown_input", "has no input 'c' (it has a)"),
    ({"a": "w"}, ["y"], ["a"], "unknown_output", "has no output 'w' (it has y)"),
    ({"a": "y"}, ["y"], ["a", "b"], "unmapped", "b unmapped"),
])
def test_a_joint_that_cannot_be_fed_says_why(link, outputs, inputs, reason, words):
    with pytest.raises(chain.ChainError) as caught:
        chain.joint(link, outputs, inputs)
    assert caught.value.reason == reason and words in str(caught.value)


def test_names_not_known_are_not_checked():
    assert chain.joint({"a": "anything"}, None, None) == [("a", "anything")]
    assert chain.joint({}, None, ["a"]) == []  # by position is decided where the model is loaded
    with pytest.raises(chain.ChainError):
        chain.joint({"a": "w"}, ["y"], None)


def test_the_messages_name_the_models_and_the_link():
    with pytest.raises(chain.ChainError) as caught:
        chain.joint({}, ["y", "z"], ["a"], before="alice/enc@1", after="alice/dec@1", where="links[0]")
    assert str(caught.value) == ("alice/enc@1 has 2 output(s) (y, z) and alice/dec@1 1 input(s) (a); say which "
                                 "feeds which in links[0].")


def test_feed_takes_the_values_in_output_order():
    values = {"y": 1, "z": 2}
    assert chain.feed(None, values, ["a", "b"]) == {"a": 1, "b": 2}
    assert chain.feed({"a": "z", "b": "y"}, values, ["a", "b"]) == {"a": 2, "b": 1}


def test_link_at_is_empty_past_the_links_given():
    assert chain.link_at([{"a": "y"}], 0) == {"a": "y"}
    assert chain.link_at([{"a": "y"}], 1) == {} and chain.link_at(None, 0) == {} and chain.link_at([None], 0) == {}


@pytest.mark.parametrize("module", ["client/hpcfair/_inference.py", "client/hpcfair/compute/runs.py",
                                    "hub/gateway/jobs/collaborate.py",
                                    "hub/gateway/services.py"])
def test_every_chain_runs_by_this_rule(module):
    calls = {node.attr for node in ast.walk(ast.parse((ROOT / module).read_text()))
             if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "chain"}
    assert calls & {"joint", "feed"}, f"{module} does not use hpcfair.chain"
