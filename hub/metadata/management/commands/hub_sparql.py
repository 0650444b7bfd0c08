"""``python manage.py hub_sparql [--rebuild]``: bring the SPARQL store up to the registry's latest change (what
every query does first), or build it again from the registry."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from hub.metadata import rdfstore


class Command(BaseCommand):
    help = "Sync the SPARQL store (Oxigraph) with the registry; --rebuild renders every version again."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--rebuild", action="store_true", help="Clear the store and render every version.")

    def handle(self, *args, rebuild: bool = False, **options) -> None:
        store = rdfstore.current()
        started = time.monotonic()
        if rebuild:
            with store.writing() as state:
                store.clear()
                state[0] = 0
        count = rdfstore.sync(store)
        self.stdout.write(f"SPARQL store: {count} artifacts rendered in {time.monotonic() - started:.1f} s")
