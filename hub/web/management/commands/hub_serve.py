"""``python manage.py hub_serve``: the embedded default in one command.

Migrates, adds the demo content, then runs a real Celery worker and the web server (granian) as
child processes on 127.0.0.1, and stops both (by their PIDs) on Ctrl-C.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from hub.web.server import web_command


class Command(BaseCommand):
    help = "Serve the hub with a Celery worker (embedded default: SQLite, files under var/)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--bind", default="127.0.0.1:8000")
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument("--no-demo", action="store_true")

    def handle(self, bind: str, web_workers: int, no_demo: bool, **options) -> None:
        python = sys.executable
        try:
            web = web_command(python, bind, web_workers, access_log=True)
        except ValueError as exc:
            raise CommandError(str(exc))
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        # The embedded broker's folders, as hub/settings.py names them (kombu does not make them).
        for key, folder in getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}).items():
            if key.endswith(("_folder", "_folder_in", "_folder_out")):
                Path(folder).mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("hub_reindex", stdout=io.StringIO())  # cheap at embedded scale; heals an older var/
        if not no_demo:
            call_command("hub_demo")
        # Links the hub hands out (PIDs, download URLs) point at this server unless configured.
        env = {"HUB_PUBLIC_URL": f"http://{bind}", **os.environ}
        children = [
            subprocess.Popen([python, "-m", "celery", "-A", "workers", "worker", "-Q", "convert,cpu",
                              "--concurrency", "1", "--loglevel", "INFO", "--hostname", "embedded@%h"], env=env),
            subprocess.Popen(web, env=env),
        ]
        self.stdout.write(f"HPCFair Hub on http://{bind}/ (API docs at /api/docs/); Ctrl-C stops it.")
        stopping = False

        def stop(signum, frame) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping and all(child.poll() is None for child in children):
                time.sleep(0.5)
        finally:
            for child in children:
                if child.poll() is None:
                    os.kill(child.pid, signal.SIGTERM)
            for child in children:
                try:
                    child.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.kill(child.pid, signal.SIGKILL)
        failed = [child.args[2] for child in children if child.returncode not in (0, -signal.SIGTERM, None)]
        if failed and not stopping:
            raise SystemExit(f"a child process stopped unexpectedly: {failed}")
