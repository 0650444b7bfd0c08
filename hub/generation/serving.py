"""Serving a model on a node: a ``serve`` job (``hub.generation.jobs.ServeJob``) runs the model's own
OpenAI-compatible server (``hpcfair.serve``) on a node its executor hands out (a Slurm job with
``HUB_EXECUTORS=serve=slurm``, else a Celery worker); the server announces its URL, the hub keeps it with the job's
secret (``Endpoint``) and routes ``/v1/chat/completions`` and ``/v1/completions`` for that model there while the
job runs (``live_endpoint``, ``forward``), and the hub's own ``…/generate`` too, as OpenAI's stream read back into
the hub's pieces (``pieces``); the server stops itself after its idle time; ``/v1/models`` says each served
model's state (``states``: live, starting, queued, offline).

Which engine: a GGUF file is served by llama.cpp, a generation build by the hub's ONNX engine, and on a GPU node a
Hugging Face causal LM folder by vLLM."""

from __future__ import annotations

import http.client
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import hpcfair
import orjson
from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from django.utils import timezone
from hpcfair.compute import CodedError
from hpcfair.generate import openai
from hpcfair.generate.run import GenerateRequest

from hub.errors import STATUS, HubError
from hub.generation.models import Endpoint
from hub.generation.services import (
    ANSWER_GRACE_S,
    Held,
    generation_folders,
    generation_model,
    gguf_file,
    source_of_generation,
)
from hub.jobs.files import place_file
from hub.jobs.models import Job
from hub.jobs.services import create_job
from hub.registry.files_access import require_files_of
from hub.registry.models import Version
from hub.storage.place import inside

MIN_IDLE_S = 1
ACTIVE = (Job.State.QUEUED, Job.State.RUNNING)
FOLLOW_S = 0.25  # how often a Celery worker running a server looks for its announcement


# --- asking for a server ------------------------------------------------------------------------------


def engine_for(version: Version, device: str) -> tuple[Version, str, str]:
    """What a node serves for ``version`` on ``device``: the version, its engine (``llama``, ``vllm``, ``onnx``) and
    for vLLM its Hugging Face folder; ``HubError`` (409) when it is nothing a node can serve."""
    if gguf_file(version):
        return version, "llama", ""
    if device == "gpu":
        source = source_of_generation(version)
        if folders := generation_folders(source):
            return source, "vllm", folders[0]
    try:
        return generation_model(version), "onnx", ""
    except HubError as exc:
        if exc.code == "not_ready":
            raise
        raise HubError("not_runnable", f"{version} cannot be served on a node: a node serves a GGUF file, a generation "
                                       "build (the hub makes one from a causal language model's folder) or, on a "
                                       "GPU, a Hugging Face causal language model folder with vLLM.") from None


def request_serve(version: Version, user, *, idle_s: Any = None, device: Any = "cpu") -> Job:
    """Queue a serve job for ``version`` (or the running or queued one ``user`` asked for already)."""
    idle_s = settings.HUB_SERVE_IDLE_S if idle_s is None else idle_s
    longest = settings.HUB_SERVE_IDLE_MAX_S
    if isinstance(idle_s, bool) or not isinstance(idle_s, int) or not MIN_IDLE_S <= idle_s <= longest:
        raise HubError("invalid", f"'idle_s' (seconds without a request before the server stops) must be an integer "
                                  f"from {MIN_IDLE_S} to {longest} (HUB_SERVE_IDLE_MAX_S); it is {idle_s!r}.")
    if device not in ("cpu", "gpu"):
        raise HubError("invalid", "'device' must be cpu or gpu.")
    served, engine, folder = engine_for(version, device)
    require_files_of(user, served)  # the node reads the model's files
    running = Job.objects.filter(kind="serve", version=served, device=device, requester=user, state__in=ACTIVE)
    if found := running.order_by("-created").first():
        return found
    name = f"{served.artifact.full_name}@{served.label}"
    return create_job("serve", user, version=served, device=device, limited=True,
                      params={"idle_s": idle_s, "engine": engine, "folder": folder, "name": name})


# --- the job's side: what a node gets, and what it says -----------------------------------------------


def prepare(job: Job, folder: Path) -> dict[str, Any]:
    """Lay the model's files out in ``folder/model`` and the job's secret in ``folder/secret`` (for the node's
    eyes only); returns the node's ``job.json``."""
    version = job.version
    if version is None or version.is_deleted:
        raise CodedError("gone", "The version to serve was deleted before the job ran.")
    secret = secrets.token_urlsafe(32)
    Endpoint.objects.update_or_create(job=job, defaults={"secret": secret, "url": "", "announced": None})
    params = job.params
    gguf = gguf_file(version) if params["engine"] == "llama" else ""
    prefix = f"{params['folder']}/".lstrip("/") if params["engine"] == "vllm" else ""
    root = folder / "model"
    for file in version.files.select_related("blob"):
        if (gguf and file.path != gguf) or not file.path.startswith(prefix):
            continue
        target = inside(root, file.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        place_file(file, target)
    descriptor = os.open(folder / "secret", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secret)
    return {"compute": "serve", "engine": params["engine"], "model": f"model/{params['folder']}".rstrip("/"),
            "gguf": gguf, "name": params["name"], "idle_s": params["idle_s"], "device": job.device,
            "host": settings.HUB_SERVE_HOST, "ports": settings.HUB_SERVE_PORTS,
            "threads": settings.HUB_GENERATE_THREADS, "max_tokens": settings.HUB_GENERATE_MAX_TOKENS,
            "seconds": settings.HUB_GENERATE_S, "context": settings.HUB_LLAMA_CONTEXT,
            "llama_server": settings.HUB_LLAMA_SERVER, "memory": settings.HUB_GENERATE_MEMORY_BYTES}


def announce(job: Job, folder: Path) -> str | None:
    """The URL the node's server wrote (``out/address.json``), kept as the job's endpoint; None until it did, and
    after the first time."""
    try:
        said = json.loads((folder / "out" / "address.json").read_text())
    except (OSError, ValueError):
        return None
    if Endpoint.objects.filter(pk=job.pk, url="").update(url=str(said["url"]), announced=timezone.now()):
        return str(said["url"])
    return None


def outcome(folder: Path) -> dict[str, Any]:
    """What the server did (``out/result-0.json``); ``CodedError`` with the node's own error."""
    out = folder / "out"
    for name, coded in (("error-0.json", True), ("result-0.json", False)):
        try:
            said = json.loads((out / name).read_text())
        except (OSError, ValueError):
            continue
        if coded:
            raise CodedError(said["code"], said["detail"])
        return {key: said.get(key) for key in ("requests", "ended", "engine", "url", "served_s")}
    raise CodedError("run_failed", "The model's server ended without saying why; its log is the job's.")


def run_here(job: Job, folder: Path, log) -> dict[str, Any]:
    """Run the node's runner on ``folder`` in this worker (the Celery executor), following its announcement,
    until it ends; stopped (SIGTERM) when the job is cancelled (``JobCancelled`` raised here)."""
    from hpcfair.generate.llama import stop

    client = str(Path(hpcfair.__file__).resolve().parent.parent)
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    env.update(PYTHONPATH=client, OMP_NUM_THREADS=str(settings.HUB_GENERATE_THREADS))
    with open(folder / "task-0.log", "wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "hpcfair.slurm_runner", str(folder)], cwd=folder, env=env,
                                   stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
    try:
        while process.poll() is None:
            if url := announce(job, folder):
                log(f"serving {job.params['name']} at {url}")
            time.sleep(FOLLOW_S)
    finally:
        stop(process)
    return outcome(folder)


# --- the hub's side: routing and states ---------------------------------------------------------------


def _keys(version: Version) -> set[int]:
    """The versions whose server answers a request for ``version``: itself, its source, its generation build."""
    keys = {version.pk, source_of_generation(version).pk}
    try:
        keys.add(generation_model(version).pk)
    except HubError:
        pass
    return keys


def live_endpoint(version: Version, user) -> Endpoint | None:
    """The announced server of a running serve job for ``version``, if any (``user`` may read both models' files)."""
    live = Endpoint.objects.filter(job__kind="serve", job__state=Job.State.RUNNING).exclude(url="")
    if not live.exists():  # one query on the common path: no server runs anywhere
        return None
    endpoint = (live.filter(job__version_id__in=_keys(version)).select_related("job__version")
                .order_by("-announced").first())
    if endpoint is not None:
        require_files_of(user, version)
        require_files_of(user, endpoint.job.version)
    return endpoint


def forward(endpoint: Endpoint, route: str, body: dict[str, Any],
            release: Callable[[], None] = lambda: None) -> HttpResponse:
    """Send an OpenAI request on to the served model's server and its answer back (a stream as it comes);
    ``release`` (the person's generation place, ``services.hold_stream``) once the answer has gone."""
    try:
        return _forward(endpoint, route, body, release)
    except BaseException:
        release()
        raise


def _open(endpoint: Endpoint, route: str, body: dict[str, Any]
          ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """POST ``body`` (named as the job serves it) to the served model's ``/v1/{route}``; ``no_worker`` when it does
    not answer."""
    job = endpoint.job
    where = urlsplit(endpoint.url)
    connection = http.client.HTTPConnection(where.hostname, where.port,
                                            timeout=settings.HUB_GENERATE_S + ANSWER_GRACE_S)
    sent = {**{k: v for k, v in body.items() if k != "device"}, "model": job.params["name"]}
    try:
        connection.request("POST", f"/v1/{route}", orjson.dumps(sent),
                           {"Content-Type": "application/json", "Authorization": f"Bearer {endpoint.secret}"})
        return connection, connection.getresponse()
    except OSError:
        connection.close()
        raise HubError("no_worker", f"The server of serve job {job.pk} for {job.params['name']} does not answer; "
                                    "try again (it may have stopped after its idle time).") from None


def _refusal(response: http.client.HTTPResponse, data: bytes) -> tuple[str, str]:
    """The hub's code and the words of a served model's OpenAI error answer."""
    try:
        error = orjson.loads(data)["error"]
        return str(error["code"]), str(error.get("message") or "The model's server refused the request.")
    except (ValueError, KeyError, TypeError):
        return "internal_error", f"The model's server answered HTTP {response.status}."


def pieces(endpoint: Endpoint, asked: GenerateRequest, release: Callable[[], None] = lambda: None
           ) -> Iterator[dict[str, Any]]:
    """The hub's own generation (``…/generate``) of a served model: ``asked`` sent to its server as OpenAI's stream
    and read back as the hub's pieces (``hpcfair.generate.openai.pieces_of``); a refusal is the ``HubError`` of its
    code; ``release`` once the answer has gone."""
    try:
        connection, response = _open(endpoint, *openai.request_of(asked, endpoint.job.params["name"]))
        if response.status >= 400:
            try:
                code, detail = _refusal(response, response.read())
            finally:
                connection.close()
            raise HubError(code if code in STATUS else "internal_error", detail)
    except BaseException:
        release()
        raise
    return Held(_read(connection, response), release)


def _read(connection: http.client.HTTPConnection, response: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    try:
        yield from openai.pieces_of(response)
    except OSError:
        yield {"error": "worker_timeout", "detail": "The model's server stopped answering."}
    finally:
        connection.close()


def _forward(endpoint: Endpoint, route: str, body: dict[str, Any], release: Callable[[], None]) -> HttpResponse:
    connection, response = _open(endpoint, route, body)
    kind = response.getheader("Content-Type", "application/json")
    if kind.startswith("text/event-stream"):
        answer: HttpResponse = StreamingHttpResponse(_relay(response, connection, release), status=response.status,
                                                     content_type=kind)
        answer["Cache-Control"] = "no-cache"
        answer["X-Accel-Buffering"] = "no"
        return answer
    try:
        data = response.read()
    finally:
        connection.close()
        release()
    if response.status < 400:
        return HttpResponse(data, status=response.status, content_type=kind)
    code = _refusal(response, data)[0]
    answer = HttpResponse(data, status=STATUS.get(code, response.status), content_type=kind)  # the hub's table
    answer["X-Error-Code"] = code
    return answer


def _relay(response: http.client.HTTPResponse, connection: http.client.HTTPConnection,
           release: Callable[[], None]) -> Iterator[bytes]:
    try:
        while data := response.read1(65536):
            yield data
    except OSError:
        yield b'data: {"error":{"message":"The model\'s server stopped answering.","code":"worker_timeout",' \
              b'"type":"server_error"}}\n\n'
    finally:
        connection.close()
        release()


def state_of(job: Job) -> str:
    """A serve job's model: ``queued`` (waiting for a node), ``starting`` (loading), ``live``, ``offline``."""
    if job.is_final:
        return "offline"
    if job.state == Job.State.QUEUED:
        return "queued"
    try:
        return "live" if job.endpoint.url else "starting"
    except Endpoint.DoesNotExist:
        return "starting"


ORDER = ("live", "starting", "queued", "offline")


def states(visible) -> dict[int, str]:
    """Version id -> the state of its best serve job, for the newest 1,000 serve jobs on ``visible`` artifacts."""
    found: dict[int, str] = {}
    jobs = (Job.objects.filter(kind="serve", version__artifact__in=visible, version__deleted_at__isnull=True)
            .select_related("endpoint").order_by("-created")[:1000])
    for job in jobs:
        state = state_of(job)
        if job.version_id not in found or ORDER.index(state) < ORDER.index(found[job.version_id]):
            found[job.version_id] = state
    return found
