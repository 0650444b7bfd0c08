"""``python manage.py hub_serve``: the embedded default in one command.

Migrates (unless ``--no-migrate``: a web node of a deployment whose migrations ran as a one-shot step), indexes
for search only the artifacts that have no entry (``hub.search.index.heal``; ``migrate`` rebuilds the index when
its format changed), adds the demo content, brings the SPARQL store up to date in a thread, then runs Celery
workers (none with ``--celery-workers 0``: a web-only node) and the web server (granian) as child processes on
127.0.0.1, restarts each when it exits (``hub.supervisor``: a killed worker does not take the site down), and
stops them (by their PIDs) on Ctrl-C.

On the embedded filesystem broker the worker uses Celery's solo pool: kombu's filesystem transport has no
event loop, so prefork would run billiard's blocking pool, whose pool processes share one lock on the task
pipe; an idle pool process that is killed (an OOM killer's choice) dies holding it, and every later pool
process waits for it forever while the worker keeps accepting messages. With solo, a kill takes the whole
worker, which is restarted here, and its job is queued again by the reaper (``workers.reaper``).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection

from hub.metadata import rdfstore
from hub.search import index
from hub.supervisor import Supervised, stop_all
from hub.web.server import check_free, web_command

# How long Ctrl-C waits for the web server and the workers to finish what they are doing.
STOP_GRACE_S = 10.0


class Command(BaseCommand):
    help = ("Serve the hub: the web server and its Celery workers (none with --celery-workers 0); embedded default: "
            "SQLite, files under var/.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--bind", default="127.0.0.1:8000")
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument("--no-demo", action="store_true")
        parser.add_argument("--celery-workers", type=int, default=1,
                            help="Celery worker processes (make stack: 2; 0: a web-only node)")
        parser.add_argument("--no-migrate", action="store_true",
                            help="do not run migrations (they run once, as their own step, before the web nodes)")

    def handle(self, bind: str, web_workers: int, no_demo: bool, celery_workers: int = 1, no_migrate: bool = False,
               **options) -> None:
        python = sys.executable
        if celery_workers < 0:
            raise CommandError("--celery-workers is 0 (a web-only node) or more")
        try:
            web = web_command(python, bind, web_workers, access_log=True)
            check_free(bind)  # before anything starts: granian would share a taken port (SO_REUSEPORT)
        except (ValueError, OSError) as exc:
            raise CommandError(exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc))
        self.prepare(migrate=not no_migrate, demo=not no_demo)
        threading.Thread(target=self.sync_sparql, name="sparql-sync", daemon=True).start()
        # Links the hub hands out (PIDs, download URLs) point at this server unless configured.
        env = {"HUB_PUBLIC_URL": f"http://{bind}", **os.environ}
        pool = "solo" if settings.CELERY_BROKER_URL.startswith("filesystem://") else "prefork"
        children = [Supervised("the web server", web, env, self.say)]
        if not celery_workers:
            self.say("no Celery worker (--celery-workers 0): jobs wait for workers started elsewhere on the same "
                     "broker")
        for number in range(1, celery_workers + 1):
            worker = [python, "-m", "celery", "-A", "workers", "worker", "-Q", "convert,cpu", "--pool", pool,
                      "--concurrency", "1", "--loglevel", "INFO", "--hostname", f"embedded{number}@%h"]
            children.insert(0, Supervised(f"Celery worker {number}", worker, env, self.say))
        if celery_workers and os.geteuid() == 0:  # Celery's own warning is silenced (hub.celery): said once here
            self.say("the workers run as root: fine in a container; elsewhere run the hub as an ordinary user")
        for child in children:
            child.start()
        self.stdout.write(f"HPCFair Hub on http://{bind}/ (API docs at /api/docs/); Ctrl-C stops it.")
        signals = 0

        def stop(signum, frame) -> None:
            nonlocal signals
            signals += 1
            if signals == 2:
                self.say("stopping now (a second Ctrl-C): the workers' running jobs are queued again at the next start")

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not signals:
                for child in children:
                    child.poll()
                time.sleep(0.2)
        finally:
            # Together, not one after another; a job still running after STOP_GRACE_S is killed, and the reaper
            # queues it again (workers.reaper).
            stop_all(children, STOP_GRACE_S, hurry=lambda: signals > 1)

    def prepare(self, migrate: bool = True, demo: bool = True) -> None:
        """What runs before the children start: folders, migrations, static files, the search index's missing
        entries, the demo content."""
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        # The embedded broker's folders, as hub/settings.py names them (kombu does not make them).
        for key, folder in getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}).items():
            if key.endswith(("_folder", "_folder_in", "_folder_out")):
                Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.rmtree(settings.HUB_METRICS_DIR, ignore_errors=True)  # the last run's web processes' counts
        if migrate:
            call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        try:
            healed = index.heal()  # not a rebuild: migrate rebuilds an index of another format
        except DatabaseError as exc:  # not migrated yet (--no-migrate), another node healing the same entry
            self.say(f"search index not checked ({type(exc).__name__}); /readyz says whether it is ready")
        else:
            if healed:
                self.say(f"search index: {healed} entries were missing or stale and were made again")
        if demo:
            call_command("hub_demo")

    def sync_sparql(self) -> None:
        """The SPARQL store brought up to the registry while the site starts serving: usually a few changes, but
        a first build renders every public version (minutes at 100k), and queries answer from what it holds
        (or 503 ``sparql_busy``) meanwhile, rather than one request doing it all."""
        try:
            count = rdfstore.sync()
        except Exception as exc:  # noqa: BLE001 - said, not raised: the site serves, and the next query syncs
            self.say(f"SPARQL store not synced ({type(exc).__name__}: {exc}); the next query tries again")
        else:
            if count:
                self.say(f"SPARQL store: {count} artifacts rendered")
        finally:
            connection.close()

    def say(self, message: str) -> None:
        self.stderr.write(f"hub_serve: {message}")
        self.stderr.flush()
