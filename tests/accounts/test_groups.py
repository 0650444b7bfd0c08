"""The site's group mapping: the IdP's groups -> (organization, role), as a pure function, and the hook a
sign-in calls with the pairs."""

from __future__ import annotations

import logging

import pytest
from django.core.exceptions import ImproperlyConfigured

from hub.accounts import groups

MAPPING = groups.parse_mapping('{"lab": "hpc-lab:read", "lab-writers": "hpc-lab:write", '
                               '"cn=admins,ou=groups,dc=hub,dc=test": ["hpc-lab:admin", "ops:read"], '
                               '"/climate": ["climate:write"]}')


def test_the_mapping_is_parsed_into_pairs():
    assert MAPPING["lab"] == [("hpc-lab", "read")]
    assert MAPPING["cn=admins,ou=groups,dc=hub,dc=test"] == [("hpc-lab", "admin"), ("ops", "read")]


def test_each_organization_gets_its_highest_role_once():
    pairs = groups.map_groups(["lab", "lab-writers", "lab", "/climate"], MAPPING)
    assert pairs == [("climate", "write"), ("hpc-lab", "write")]
    both = groups.map_groups(["cn=admins,ou=groups,dc=hub,dc=test", "lab"], MAPPING)
    assert both == [("hpc-lab", "admin"), ("ops", "read")]


def test_groups_the_site_does_not_map_give_nothing():
    assert groups.map_groups(["students", "LAB"], MAPPING) == []  # names are exact: LAB is not lab
    assert groups.map_groups([], MAPPING) == []


@pytest.mark.parametrize("text, named", [
    ("not json", "not JSON"),
    ('["lab"]', "JSON object"),
    ('{"lab": "hpc-lab"}', "'hpc-lab'"),
    ('{"lab": "hpc-lab:owner"}', "'hpc-lab:owner'"),
    ('{"lab": ":read"}', "':read'"),
    ('{"lab": 3}', "None"),
])
def test_a_wrong_mapping_is_refused_naming_the_entry(text, named):
    with pytest.raises(ImproperlyConfigured, match="HUB_GROUP_MAP") as refused:
        groups.parse_mapping(text)
    assert named in str(refused.value)


def test_the_hook_syncs_the_memberships_and_logs_them(caplog, settings, make_user):
    """The sign-in hook is hub.orgs' sync: the mapped role is given, an organization the site lacks is skipped."""
    from hub.orgs.models import Membership
    from hub.orgs.services import create_organization

    settings.HUB_GROUP_MAP = '{"lab": "hpc-lab:write", "other": "nowhere:read"}'
    create_organization(make_user("boss"), "hpc-lab")
    ada = make_user("ada")
    with caplog.at_level(logging.INFO, logger="hub.audit"):
        groups.apply_memberships(ada, groups.site_pairs(["lab", "other"]), source="oidc")
    said = [r.getMessage() for r in caplog.records if r.name == "hub.audit"]
    assert "memberships from oidc for ada: hpc-lab:write, nowhere:read" in said
    found = Membership.objects.get(user=ada, org__account__username="hpc-lab")
    assert found.role == "write" and found.source == "oidc"
    groups.apply_memberships(ada, [], source="oidc")  # the group gone at the next sign-in: the role goes
    assert not Membership.objects.filter(user=ada, org__account__username="hpc-lab").exists()
