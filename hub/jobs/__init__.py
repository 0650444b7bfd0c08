"""Jobs: the source of truth for every long operation; Celery is only the transport."""
