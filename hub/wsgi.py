"""WSGI entry point (granian ``hub.wsgi:application``): Django, behind the gateway's express path for ``/infer``.
Each web process maps its host's search base as it starts, in the background (``hub.search.index_copy.warm``;
the first process on a host builds and publishes it; ``/readyz`` says when it is loaded)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
django_application = get_wsgi_application()

from hub.gateway.wsgi import Express  # noqa: E402 - needs the settings configured above
from hub.ops.logs import quiet_probes  # noqa: E402
from hub.runtime import WithoutProcessEnvironment, settle  # noqa: E402
from hub.search import index_copy  # noqa: E402

# The express path reads only the request's own keys, and hands everything else to Django with the process's
# environment dropped first (issue 39: the drop is a loop over every variable, 5-10 us a request).
application = Express(WithoutProcessEnvironment(django_application))
quiet_probes()  # /healthz, /readyz and /metrics stay out of granian's access log
settle()
index_copy.warm()
