"""Grant a person or an organization a Slurm account (an allocation), with its partitions and QoS."""

from __future__ import annotations

import logging

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from hub.orgs.models import SlurmAccount

audit = logging.getLogger("hub.audit")


class Command(BaseCommand):
    help = "Give OWNER (a username or an organization) the Slurm account ACCOUNT; --remove takes it away."

    def add_arguments(self, parser) -> None:
        parser.add_argument("owner")
        parser.add_argument("account")
        parser.add_argument("--partition", action="append", default=[], help="A partition it may use (repeat; "
                                                                             "none: any).")
        parser.add_argument("--qos", default="", help="sbatch --qos for its jobs.")
        parser.add_argument("--default", action="store_true", help="Bill it when a job names no account.")
        parser.add_argument("--remove", action="store_true")

    def handle(self, *args, owner: str, account: str, partition: list[str], qos: str, default: bool, remove: bool,
               **options) -> None:
        user = get_user_model().objects.filter(username=owner).first()
        if user is None:
            raise CommandError(f"No person or organization named {owner}.")
        if remove:
            deleted, _ = SlurmAccount.objects.filter(owner=user, account=account).delete()
            if not deleted:
                raise CommandError(f"{owner} has no Slurm account {account}.")
            audit.info("slurm account %s: %s removed", owner, account)
            self.stdout.write(f"{owner} no longer bills to {account}")
            return
        with transaction.atomic():
            if default:
                SlurmAccount.objects.filter(owner=user, is_default=True).exclude(account=account).update(
                    is_default=False)
            SlurmAccount.objects.update_or_create(owner=user, account=account, defaults={
                "partitions": partition, "qos": qos, "is_default": default})
        audit.info("slurm account %s: %s (partitions %s, qos %s%s)", owner, account, ",".join(partition) or "any",
                   qos or "site's", ", default" if default else "")
        self.stdout.write(f"{owner} bills to {account}" + (" by default" if default else ""))
