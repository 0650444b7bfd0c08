"""Celery app and tasks. Each task is a small function run inside ``runner.execute``."""
