"""WSGI entry point (gunicorn ``hub.wsgi``): Django, behind the gateway's express path for ``/infer``."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
django_application = get_wsgi_application()

from hub.gateway.express import Express  # noqa: E402 - needs the settings configured above

application = Express(django_application)
