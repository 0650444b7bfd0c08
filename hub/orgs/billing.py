"""Which Slurm account a job is billed to. A job is billed to the account its requester names (``account`` in
the job API, ``device_args.account`` in a task config), else to the default account of the artifact's owner when
the requester may use it, else to the requester's own default, else to the site's ``HUB_SLURM_ACCOUNT``.

A person may use their own accounts and those of the organizations where they have the write or admin role.
Naming any other account is refused before anything is queued (403 ``account_not_allowed``), and so is a job
for a partition its account may not use."""

from __future__ import annotations

from django.db.models import Q

from hub.errors import HubError
from hub.orgs.models import Membership, Organization, Role, SlurmAccount, roles_at_least


def usable(user):
    """The accounts ``user`` may bill to: their own, and their write/admin organizations' (one query)."""
    orgs = Membership.objects.filter(user=user, role__in=roles_at_least(Role.WRITE)).values("org_id")
    return SlurmAccount.objects.filter(Q(owner=user) | Q(owner_id__in=orgs)).select_related("owner")


def choose(requester, owner, named: str | None, partition: str | None = None) -> SlurmAccount | None:
    """The account to bill (None: the site's), checked against ``requester`` and ``partition``."""
    if requester is None or not requester.is_authenticated:
        return None
    if named:
        found = usable(requester).filter(account=named).first()
        if found is None:
            raise HubError("account_not_allowed", _who_grants(named, requester))
    else:
        found = None
        if owner is not None and owner.pk != requester.pk:
            found = usable(requester).filter(owner=owner, is_default=True).first()
        if found is None:
            found = SlurmAccount.objects.filter(owner=requester, is_default=True).first()
    if found is not None and partition and found.partitions and partition not in found.partitions:
        raise HubError("account_not_allowed", f"The Slurm account {found.account} may use the partitions "
                                              f"{', '.join(found.partitions)}, not {partition}; choose another "
                                              "device or account, or ask the site to extend it.")
    return found


def _who_grants(named: str, requester) -> str:
    holders = SlurmAccount.objects.filter(account=named).select_related("owner")
    orgs = [h.owner.username for h in holders if Organization.objects.filter(account_id=h.owner_id).exists()]
    mine = ", ".join(sorted(usable(requester).values_list("account", flat=True))) or "none"
    if orgs:
        return (f"You may not bill jobs to the Slurm account {named}: it belongs to the organization "
                f"{', '.join(orgs)}; ask one of its admins for the write role. Your accounts: {mine}.")
    return (f"You may not bill jobs to the Slurm account {named} (it is not yours, or the hub does not know it); "
            f"ask the site's administrators for an allocation. Your accounts: {mine}.")
