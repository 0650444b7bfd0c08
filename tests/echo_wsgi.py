"""A WSGI application for tests/test_runtime.py: answers with the environ keys it was given, behind the
hub's ``WithoutProcessEnvironment`` as in hub/wsgi.py."""

import json

from hub.runtime import WithoutProcessEnvironment


def echo(environ, start_response):
    body = json.dumps({key: value for key, value in environ.items() if isinstance(value, str)}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


application = WithoutProcessEnvironment(echo)
