"""The person behind a site identity: made from the claims, found again by issuer and subject (never by
username), updated, refused when disabled."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from hub.accounts import people
from hub.accounts.models import ExternalIdentity
from hub.errors import HubError

pytestmark = pytest.mark.django_db
ISSUER = "https://idp.example.org"


def test_the_first_sign_in_makes_the_person_and_a_later_one_updates_them():
    made = people.person_for(ISSUER, "s-1", username="ada", email="ada@a.example", first_name="Ada",
                             last_name="Lovelace", orcid="https://orcid.org/0000-0002-1825-0097")
    assert not made.has_usable_password()
    again = people.person_for(ISSUER, "s-1", username="ada.renamed", email="ada@b.example", first_name="Ada",
                              last_name="King")
    assert again.pk == made.pk and again.username == "ada"  # the username stays: others link to it
    assert (again.email, again.last_name) == ("ada@b.example", "King")
    assert ExternalIdentity.objects.get().orcid == "0000-0002-1825-0097"  # kept when a later sign-in gives none


def test_the_same_subject_at_another_issuer_is_another_person():
    first = people.person_for(ISSUER, "s-1", username="ada")
    second = people.person_for("https://other.example.org", "s-1", username="ada")
    assert first.pk != second.pk and second.username == "ada-2"


@pytest.mark.parametrize("wanted, name", [("Ada Lovelace", "Ada-Lovelace"), ("ada@lab.example", "ada-lab.example"),
                                          ("", "s-9"), ("---", "user")])
def test_a_username_is_made_a_hub_name(wanted, name):
    assert people.person_for(ISSUER, "s-9" if wanted == "" else wanted, username=wanted).username == name


def test_a_disabled_account_is_refused_with_whom_to_ask(settings):
    settings.HUB_ADMIN_EMAIL = "hub-admins@site.example"
    user = people.person_for(ISSUER, "s-1", username="ada")
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(HubError) as refused:
        people.person_for(ISSUER, "s-1", username="ada")
    assert refused.value.code == "signin_refused" and "hub-admins@site.example" in refused.value.message


@pytest.mark.parametrize("value, orcid", [("0000-0002-1825-0097", "0000-0002-1825-0097"),
                                          ("https://orcid.org/0000-0001-5109-371X", "0000-0001-5109-371X"),
                                          ("not an orcid", ""), (None, ""), ("0000-0002-1825-00977", "")])
def test_orcid_ids_are_kept_in_their_short_form(value, orcid):
    assert people.orcid_of(value) == orcid


def test_the_group_claim_may_be_a_list_or_one_string(settings):
    assert people.groups_of({"groups": ["a", 3, "b"]}) == ["a", "b"]
    assert people.groups_of({"groups": "a"}) == ["a"]
    settings.HUB_OIDC_CLAIMS = {**settings.HUB_OIDC_CLAIMS, "groups": "roles"}
    assert people.groups_of({"groups": ["a"], "roles": ["r"]}) == ["r"]
