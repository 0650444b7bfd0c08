"""``python manage.py hub_gc``: remove expired uploads and blobs that no row references (the workers also do
this every ``HUB_GC_INTERVAL_S``)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from hub.registry.gc import collect


class Command(BaseCommand):
    help = ("Delete expired upload sessions and their staged bytes, unreferenced blobs, and direct uploads' "
            "objects that no blob points to.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--grace-hours", type=float, default=1.0,
                            help="leave blobs and staged files younger than this (uploads in flight)")

    def handle(self, grace_hours: float, **options) -> None:
        self.stdout.write(str(collect(grace_hours)))
