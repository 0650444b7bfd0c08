"""Shared fixtures: users and tokens, API clients, storage on every backend, a real S3 server."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from hub.accounts.models import ApiToken
from hub.registry import services
from hub.registry.uploads import StagedFile
from tests.ports import free_port, free_ports
from tests.system_packages import installed_profile, require_program

ROOT = Path(__file__).resolve().parent.parent


# --- tiers ---------------------------------------------------------------------------------------------
# `make test` runs everything. `make test-fast` runs `-m "not slow and not worker and not services"` on SQLite
# with no server started: the logic of every app. A test is `services` when it needs a process beyond this one
# (an S3 server, a Celery worker, the hub as a process, a browser, a container engine); the fixtures say so.
SERVICE_FIXTURES = {"s3_server", "s3", "worker", "shared_storage", "embedded_hub", "browser", "site", "hub_users",
                    "cube_base", "oidc_provider", "slapd"}


def pytest_collection_modifyitems(config, items) -> None:
    from django.conf import settings as django_settings

    on_postgres = django_settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    for item in items:
        params = getattr(item, "callspec", None)
        if SERVICE_FIXTURES & set(item.fixturenames) or (params and params.params.get("backend") == "s3"):
            item.add_marker(pytest.mark.services)
        if item.get_closest_marker("postgres") and not on_postgres:
            item.add_marker(pytest.mark.skip(reason="compares with PostgreSQL: run through `make test` (or set "
                                                    "DATABASE_URL to a PostgreSQL database)"))


# pytest-django's live server is Django's threaded WSGI server, which writes a response's headers and body in
# two sends: with Nagle's algorithm on, the body waits for the client's delayed ACK, 40 ms on every request of a
# kept-alive connection (requests.Session, schemathesis), 8x the request itself. The hub's own server (granian)
# does not do this; the test server must not either.
from django.core.servers import basehttp  # noqa: E402

basehttp.WSGIRequestHandler.disable_nagle_algorithm = True


# MLCube builds: podman's settings for this machine, wheels and the base image kept between runs.
os.environ.setdefault("CONTAINERS_CONF", str(ROOT / "deploy" / "podman" / "containers.conf"))
os.environ.setdefault("MLCUBE_SYSTEM_SETTINGS", str(Path(tempfile.gettempdir()) / f"mlcube-{os.getpid()}.yaml"))
CUBE_WHEELS = Path.home() / ".cache" / "hpcfair-hub" / "wheels"


def podman_image_ids() -> set[str]:
    out = subprocess.run(["podman", "images", "--all", "--quiet", "--no-trunc"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return set(out.split())


@pytest.fixture(scope="session")
def cube_base():
    """The MLCube base image (debootstrap + podman import, made once per machine by scripts/cube-base.sh).

    The images the session builds on it (every test that builds one uses this fixture) are removed at its
    end, so that runs do not pile up images: rebuilding a tag leaves the previous image untagged."""
    require_program("podman")
    require_program("debootstrap")
    image = "localhost/hpcfair-base:bookworm"
    subprocess.run([str(ROOT / "scripts" / "cube-base.sh"), image], check=True, timeout=900)
    before = podman_image_ids()
    yield image
    built = podman_image_ids() - before
    if built:
        subprocess.run(["podman", "rmi", "--force", *sorted(built)], capture_output=True, timeout=300)


def wait_for_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def stop_process(proc: subprocess.Popen) -> None:
    """End a process we started, by its PID."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- Chromium through Playwright: one browser for the whole session (tests/web, and the sign-in tests) ---------

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def browser():
    """Chromium through Playwright's sync API. That API keeps an event loop running in the main thread, and
    Django's ORM refuses to run beside one unless told the thread is synchronous after all (it is): tests
    that drive pages of a live server in this process use the database too."""
    assert require_program("chromium") == CHROMIUM
    from playwright.sync_api import sync_playwright

    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield launched
            launched.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before



# --- a real S3 server: SeaweedFS (`weed` from the virtual environment), as scripts/services.sh starts it ---


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """(endpoint, access key, secret key) of a SeaweedFS S3 server: the one `scripts/services.sh start`
    started (its HUB_TEST_S3_* variables), or one this session starts and stops itself."""
    if os.environ.get("HUB_TEST_S3_ENDPOINT"):
        yield (os.environ["HUB_TEST_S3_ENDPOINT"], os.environ["HUB_TEST_S3_ACCESS_KEY"],
               os.environ["HUB_TEST_S3_SECRET_KEY"])
        return
    require_program("weed")
    env = {**os.environ, "HUB_TEST_RUN_DIR": str(tmp_path_factory.mktemp("s3")), "HUB_TEST_S3_PORT": str(free_ports(8))}
    script = str(ROOT / "scripts" / "services.sh")
    out = subprocess.run([script, "start-s3"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    exported = dict(line.removeprefix("export ").split("=", 1) for line in out.stdout.splitlines())
    try:
        yield (exported["HUB_TEST_S3_ENDPOINT"], exported["HUB_TEST_S3_ACCESS_KEY"],
               exported["HUB_TEST_S3_SECRET_KEY"])
    finally:
        subprocess.run([script, "stop-s3"], env=env, timeout=60)


@pytest.fixture(scope="session", autouse=True)
def quick_password_hashing():
    """Users' passwords hashed with one round of MD5 in this process: Django's PBKDF2 takes ~0.3 s a user by
    design, and most tests make three users. Processes the tests start (workers, servers) hash as deployed."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def hub_dirs(settings, tmp_path):
    """Each test gets its own blob and upload directories (filesystem backend)."""
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(tmp_path / "blobs")}
    settings.HUB_UPLOAD_DIR = tmp_path / "uploads"
    settings.HUB_METRICS_DIR = tmp_path / "metrics"
    settings.HUB_SPARQL_STORE_DIR = tmp_path / "sparql"
    settings.HUB_SEARCH_INDEX_DIR = tmp_path / "search-index"
    # The API's rate counts (hub.ops.throttles) live in a cache that outlives a test (a file cache under var/, or
    # Redis), and user ids and 127.0.0.1 recur: each test counts under a prefix of its own.
    settings.CACHES = {name: {**conf, "KEY_PREFIX": f"test-{os.getpid()}-{tmp_path.name}"}
                       for name, conf in settings.CACHES.items()}
    from hub.ops import throttles

    throttles.leases.clear()  # requests counted ahead, in another test's counts
    return tmp_path


@pytest.fixture(autouse=True)
def fresh_search_index():
    """The search index trusts that committed entries only change through reindexing; each test's database is
    rolled back or flushed, so each test starts with a fresh view (and its own folder of bases, ``hub_dirs``)."""
    from hub.search import index_copy

    index_copy.forget()
    yield
    index_copy.forget()


_bucket_counter = iter(range(10**6))


@pytest.fixture(params=["filesystem", "s3"])
def backend(request, settings, tmp_path):
    """Runs a test once per storage backend; S3 uses a fresh bucket on the real S3 server."""
    if request.param == "s3":
        use_s3_bucket(settings, request.getfixturevalue("s3_server"))
    yield request.param
    if request.param == "s3":
        drop_bucket()


def use_s3_bucket(settings, server: tuple[str, str, str], **options) -> None:
    """Point the hub at a fresh bucket of the S3 server (``drop_bucket`` removes it)."""
    endpoint, access_key, secret_key = server
    settings.HUB_STORAGE = {
        **settings.HUB_STORAGE, "BACKEND": "s3", "S3_ENDPOINT": endpoint,
        "S3_BUCKET": f"hub-test-{os.getpid()}-{next(_bucket_counter)}",
        "S3_ACCESS_KEY": access_key, "S3_SECRET_KEY": secret_key, "S3_SECURE": False, **options,
    }


S3_PART = 5 * 1024 * 1024  # S3's smallest part: direct-upload tests use it to have several parts


@pytest.fixture
def s3(settings, s3_server, live_server):
    """The hub on a fresh bucket of the S3 server, offering direct uploads in ``S3_PART`` parts by URLs
    that live 60 s; the bucket is dropped afterwards. Yields the blob store."""
    from hub.storage import get_blob_store

    use_s3_bucket(settings, s3_server, S3_PART_SIZE=S3_PART, S3_PRESIGN_SECONDS=60)
    settings.HUB_PUBLIC_URL = live_server.url
    yield get_blob_store()
    drop_bucket()


def drop_bucket() -> None:
    """Remove the test's bucket and what it holds (SeaweedFS frees the bucket's volume with it)."""
    from hub.storage import get_blob_store

    store = get_blob_store()
    if store.client.bucket_exists(store.bucket):
        store.client.remove_bucket(store.bucket)


# --- users, tokens, clients ---------------------------------------------------------------------


@pytest.fixture
def make_user(db):
    def make(username: str):
        return get_user_model().objects.create_user(username=username, password=f"{username}-pw-12345")

    return make


@pytest.fixture
def owner(make_user):
    return make_user("alice")


@pytest.fixture
def other(make_user):
    return make_user("mallory")


@pytest.fixture
def collaborator(make_user):
    return make_user("bob")


def client_for(user, scope: str = "write") -> APIClient:
    client = APIClient()
    if user is not None:
        _, raw = ApiToken.issue(user, scope=scope)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def api(owner) -> APIClient:
    """The owner's client, with a write token."""
    return client_for(owner)


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


# --- content ------------------------------------------------------------------------------------


def valid_metadata(kind: str = "model", **extra) -> dict:
    """The smallest metadata a ``kind`` version passes validation with (formats are derived)."""
    base = {"title": "A test artifact", "description": "Made by the test suite.",
            "creators": [{"name": "Alice Example"}], "license": "MIT"}
    if kind == "model":
        base.update({"framework": "pytorch", "task": "regression"})
    return {**base, **extra}



def staged(tmp_path: Path, path: str, data: bytes) -> StagedFile:
    target = tmp_path / f"src-{hashlib.sha256(data).hexdigest()[:16]}-{path.replace('/', '_')}"
    target.write_bytes(data)
    return StagedFile(path=path, staged=target, sha256=hashlib.sha256(data).hexdigest(), size=len(data))


@pytest.fixture
def publish(tmp_path):
    """Create an artifact (if needed) and a version with the given files, through the services."""

    def make(user, name: str, files: dict[str, bytes] | None = None, *, kind: str = "model",
             visibility: str = "public", label: str = "", collaborators=()):
        from hub.registry.models import Artifact

        artifact = Artifact.objects.live().filter(owner=user, name=name).first() or services.create_artifact(
            user, kind=kind, name=name, visibility=visibility, collaborators=collaborators,
            title=f"Title of {name}", description=f"Description of {name}",
        )
        files = files if files is not None else {"weights.bin": os.urandom(64)}
        version = services.create_version(
            artifact, user, files=[staged(tmp_path, p, d) for p, d in files.items()], label=label,
            metadata=valid_metadata(kind, title=f"Title of {name}"),
        )
        return artifact, version

    return make


def at_once(*requests):
    """Run each request in a thread of its own (its own database connection and transaction), started together;
    their answers in order. For races between two requests of one person (the quotas' locks)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    barrier = threading.Barrier(len(requests))

    def run(request):
        try:
            barrier.wait(timeout=10)
            return request()
        finally:
            connection.close()  # this thread's own connection

    with ThreadPoolExecutor(len(requests)) as pool:
        return [future.result(timeout=60) for future in [pool.submit(run, request) for request in requests]]


def run_on_sqlite_file(tmp_path: Path, script: str, **env: str) -> str:
    """Run ``script`` (Python, Django set up by it) in a process of its own on a fresh SQLite file (WAL, the
    embedded default as deployed, where two connections can race) with ``env`` added; its standard output."""
    environ = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "HUB_BROKER_URL")}
    environ.update(DATABASE_URL=f"sqlite:///{tmp_path / 'hub.sqlite3'}", HUB_VAR_DIR=str(tmp_path / "var"),
                   DJANGO_SETTINGS_MODULE="hub.settings", PYTHONPATH=f"{ROOT}:{ROOT / 'client'}", **env)
    out = subprocess.run([sys.executable, "-c", script], env=environ, cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def multipart_file(name: str, data: bytes):
    handle = io.BytesIO(data)
    handle.name = name
    return handle


# --- a real Celery worker ---------------------------------------------------------------------------


def worker_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a worker on the test database, Redis and a filesystem store under ``root``;
    skips the test when not run through `make test` (no Redis or PostgreSQL)."""
    from django.conf import settings as django_settings

    missing = pytest.fail if installed_profile() else pytest.skip  # make test starts both: never skip there
    if not os.environ.get("HUB_BROKER_URL", "").startswith("redis://"):
        missing("needs Redis: run through `make test` (sets HUB_BROKER_URL)")
    db = django_settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        missing("needs PostgreSQL: run through `make test` (sets DATABASE_URL)")
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "HUB_STORAGE": "filesystem",
        "HUB_STORAGE_DIR": str(root / "blobs"),
        "HUB_UPLOAD_DIR": str(root / "uploads"),
        "HUB_SPARQL_STORE_DIR": str(root / "sparql"),
        "HUB_CUBE_ON_CONVERT": "off",  # tests/containers turn it on for their own worker
        **extra,
    }


def start_worker(root: Path, env: dict[str, str], name: str = "worker", queues: str = "convert,cpu",
                 pool: str = "solo") -> subprocess.Popen:
    """Start ``celery worker`` (solo pool, queues convert and cpu by default); its log is ``root/<name>.log``.
    The session's shared worker (``worker``) is stopped first: it would take this worker's jobs."""
    stop_shared_worker()
    return _start_worker(root, env, name, queues, pool)


def _start_worker(root: Path, env: dict[str, str], name: str, queues: str, pool: str) -> subprocess.Popen:
    log = open(root / f"{name}.log", "a")  # noqa: SIM115 - closed when the process is stopped
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", queues, "--concurrency", "1",
         "--pool", pool, "--loglevel", "INFO", "--hostname", f"{name}-{os.getpid()}@%h"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()
    deadline = time.monotonic() + 60
    while "ready." not in (root / f"{name}.log").read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            raise RuntimeError((root / f"{name}.log").read_text())
        time.sleep(0.2)
    return proc


# One Celery worker serves every module that asks for ``worker`` in a row: starting one costs 5-16 s, and 17
# module visits of the serial tier asked for one each (now 10 starts). It is stopped before any test of another
# module that does not ask for it (so no test meets a worker it did not ask for, as when each module had its own)
# and before a test starts a worker of its own (start_worker); the next module that asks for it starts a fresh one.
_shared_worker: dict = {}  # proc, root, released (the module that started or reused it has ended)


def stop_shared_worker() -> None:
    """Stop the session's shared worker, if one runs."""
    if proc := _shared_worker.pop("proc", None):
        stop_process(proc)


@pytest.fixture(scope="session")
def shared_worker_session(django_db_setup):
    """Stops the shared worker before the test database goes (a session fixture's teardown, in reverse order)."""
    yield
    stop_shared_worker()


@pytest.fixture(scope="module")
def worker(shared_worker_session, django_db_blocker, tmp_path_factory):
    """A Celery worker on the test database and Redis (shared with the modules that ask for it next, see
    above); yields the directory of its blobs and log."""
    from workers.celery import app

    app.control.purge()  # messages left by tests that published without a worker
    if "proc" not in _shared_worker or _shared_worker["proc"].poll() is not None:
        stop_shared_worker()
        root = tmp_path_factory.mktemp("worker")
        _shared_worker.update(proc=_start_worker(root, worker_env(root), "worker", "convert,cpu", "solo"), root=root)
    _shared_worker["released"] = False
    yield _shared_worker["root"]
    _shared_worker["released"] = True


def pytest_runtest_setup(item) -> None:
    """A test of another module that does not ask for the shared worker runs without it."""
    if _shared_worker.get("released") and "worker" not in item.fixturenames:
        stop_shared_worker()



def wait_for_job(job_id, timeout: float = 60.0):
    """Poll the Job row until it is final (pulpcore's monitor_task)."""
    from hub.jobs.models import Job

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.is_final:
            return job
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} still {job.state} after {timeout}s")


def doomed_worker_env(root: Path, settings) -> dict[str, str]:
    """For a test that kills its worker: heartbeats every second and a job stale after 4 s (in this process
    too, whose API poll reaps it), this process on the worker's blobs and uploads, no messages left queued."""
    from workers.celery import app

    env = worker_env(root, HUB_JOB_HEARTBEAT_S="1", HUB_JOB_STALE_S="4")
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(root / "blobs")}
    settings.HUB_UPLOAD_DIR = root / "uploads"
    settings.HUB_JOB_STALE_S = 4
    app.control.purge()
    return env


def poll_job_api(api, job_id, timeout: float = 240.0) -> dict:
    """Poll ``GET /api/v1/jobs/<id>/`` as a client does until the job is final; that poll also reaps a stale
    job (its worker lost) and queues it again. Returns the job as the API shows it."""
    from hub.jobs.models import Job

    deadline = time.monotonic() + timeout
    while True:
        shown = api.get(f"/api/v1/jobs/{job_id}/").json()
        if shown["state"] in Job.FINAL_STATES:
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.5)


@pytest.fixture
def shared_storage(settings, worker):
    """Point this test process at the worker's blob and upload directories."""
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(worker / "blobs")}
    settings.HUB_UPLOAD_DIR = worker / "uploads"
    return worker


@pytest.fixture(autouse=True)
def client_home(tmp_path, monkeypatch):
    """The hpcfair client's login file and cache live in the test's folder; no progress bars."""
    monkeypatch.setenv("HPCFAIR_CONFIG", str(tmp_path / "hpcfair-login"))
    monkeypatch.setenv("HPCFAIR_CACHE", str(tmp_path / "hpcfair-cache"))
    monkeypatch.setenv("HPCFAIR_NO_PROGRESS", "1")
    monkeypatch.setenv("HPCFAIR_WHEELS", str(CUBE_WHEELS))  # wheels for cube images: kept between runs
    for name in ("HPCFAIR_ENDPOINT", "HPCFAIR_TOKEN", "HPCFAIR_DEBUG"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def embedded_hub(tmp_path_factory):
    """``make run``'s embedded default as a process (granian + a Celery worker on the filesystem broker,
    SQLite, files in a private var dir): (url, a write token of the demo user, the var dir)."""
    var = tmp_path_factory.mktemp("embedded-var")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env.update(HUB_VAR_DIR=str(var), HUB_PUBLIC_URL=f"http://127.0.0.1:{port}", HUB_CUBE_ON_CONVERT="generate")
    log = open(var / "serve.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{port}"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=90, proc=proc)
        token = subprocess.run([sys.executable, "manage.py", "hub_token", "demo", "--scope", "write"], cwd=ROOT,
                               env=env, capture_output=True, text=True, check=True).stdout.strip()
        yield f"http://127.0.0.1:{port}", token, var
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        log.close()
    assert proc.returncode == 0, (var / "serve.log").read_text()[-3000:]
