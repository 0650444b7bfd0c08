"""ARK minting, check characters and normalisation."""

from __future__ import annotations

from hub.registry import pids


def test_minted_pids_have_the_configured_form_and_a_valid_check(settings):
    settings.HUB_PID = {"NAAN": "12345", "SHOULDER": "x9"}
    pid = pids.mint()
    assert pid.startswith("ark:/12345/x9")
    assert len(pid) == len("ark:/12345/x9") + pids.BLADE_LENGTH + 1
    assert pids.is_valid(pid)


def test_check_character_matches_the_noid_reference_example():
    # The NOID documentation's worked example: 13030/xf93gt2 has check character 'q'.
    assert pids.check_char("13030/xf93gt2") == "q"


def test_single_character_typos_and_transpositions_are_caught():
    pid = "ark:/99999/fk4" + "b7x2k9mq"
    pid += pids.check_char(pid[len("ark:/"):])
    assert pids.is_valid(pid)
    body = pid[len("ark:/99999/fk4"):]
    for i in range(len(body) - 1):
        swapped = body[:i] + body[i + 1] + body[i] + body[i + 2:]
        if swapped != body:
            assert not pids.is_valid("ark:/99999/fk4" + swapped), swapped
    for i, char in enumerate(body):
        for replacement in "0bz":
            if replacement != char:
                typo = body[:i] + replacement + body[i + 1:]
                assert not pids.is_valid("ark:/99999/fk4" + typo), typo


def test_normalize_accepts_modern_and_hyphenated_forms():
    assert pids.normalize("ark:99999/fk4-abc") == "ark:/99999/fk4abc"
    assert pids.normalize("ARK:/99999/fk4abc") == "ark:/99999/fk4abc"
    assert pids.normalize("doi:10.1/x") is None
    assert pids.normalize("ark:/99999/../etc") is None or not pids.is_valid("ark:/99999/../etc")
