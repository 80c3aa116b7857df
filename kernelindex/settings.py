"""KernelIndex settings, read from the environment.

Every variable is listed in `.env.example`; a `.env` file beside `manage.py` is read too (the
process environment wins over it), and an empty value means the default. The defaults are the
embedded ones (an SQLite file, kombu's filesystem transport as the Celery broker), so
`python3 scripts/dev.py run` works on a fresh machine; set `DATABASE_URL` and `CELERY_BROKER_URL`
for PostgreSQL and Redis.
"""

import hashlib
import os
import secrets
from pathlib import Path

import environ
import whitenoise.compress
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from registry.reruns.harness.timing import DEFAULT_SETTINGS as TIMING_DEFAULTS

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env")


def _env(reader, name, **kwargs):
    """Read one variable; a malformed value stops the start with the variable's name. An empty
    value is the default, so `cp .env.example .env` (which lists every variable, most of them
    empty) gives the development set-up."""
    if os.environ.get(name) == "":
        del os.environ[name]
    try:
        return reader(name, **kwargs)
    except (ValueError, TypeError, ImproperlyConfigured) as exc:
        raise ImproperlyConfigured(f"Environment variable {name} is invalid: {exc}") from exc


VAR_DIR = Path(_env(env.str, "KERNELINDEX_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = _env(env.bool, "DEBUG", default=False)
# A GPU worker is untrusted (docs/deploy.md, "GPU workers"): it holds no database credential, no
# SECRET_KEY and no job-signing key, only its own worker key and the key that verifies jobs.
KERNELINDEX_ROLE = _env(env.str, "KERNELINDEX_ROLE", default="site")
if KERNELINDEX_ROLE not in ("site", "gpu-worker"):
    raise ImproperlyConfigured("Environment variable KERNELINDEX_ROLE is invalid: use site or gpu-worker.")
GPU_WORKER = KERNELINDEX_ROLE == "gpu-worker"
SECRET_KEY = _env(env.str, "SECRET_KEY", default="")
if GPU_WORKER:
    # Nothing a GPU worker does is signed with SECRET_KEY; Django still wants one.
    SECRET_KEY = SECRET_KEY or secrets.token_urlsafe(50)
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "Environment variable SECRET_KEY is required when DEBUG is off. For local "
            "development put DEBUG=1 in .env (`python3 scripts/dev.py run` writes one); for a "
            "`scripts/prod.py` deployment, load its settings first: set -a; . var/prod/env; set +a"
        )
    SECRET_KEY = "django-insecure-local-development-only"
ALLOWED_HOSTS = _env(env.list, "ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = _env(env.list, "CSRF_TRUSTED_ORIGINS", default=[])
SITE_URL = _env(env.str, "SITE_URL", default="http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.sites",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "csp",
    "django_prometheus",
    "registry",
    "registry.reruns",
    # The sources of benchmark data, one app each, in load order (docs/sources.md): the registered
    # plug-ins are the installed apps whose package defines SOURCE.
    "registry.sources.liger",
    "registry.sources.kernelbench",
    "attestations",
]
GITHUB_CLIENT_ID = _env(env.str, "GITHUB_CLIENT_ID", default="")
GITHUB_CLIENT_SECRET = _env(env.str, "GITHUB_CLIENT_SECRET", default="")
if GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET:
    INSTALLED_APPS.append("allauth.socialaccount.providers.github")

MIDDLEWARE = [
    # First and last: /metrics counts every request and response (kernelindex/metrics.py).
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "kernelindex.logging.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "kernelindex.middleware.HtmlGZipMiddleware",
    "kernelindex.middleware.RequestLimitsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "kernelindex.middleware.HeadAsGetMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "kernelindex.auth.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "kernelindex.middleware.AdminFilterOverflowMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "kernelindex.urls"
WSGI_APPLICATION = "kernelindex.wsgi.application"
SITE_ID = 1

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": _env(env.db_url, "DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if GPU_WORKER:
    # No database at all: any query a GPU worker tried would fail at once (Django's dummy backend).
    for _name in ("DATABASE_URL", "CACHE_URL", "SECRET_KEY"):
        if os.environ.get(_name):
            raise ImproperlyConfigured(
                f"{_name} must not be given to a GPU worker (KERNELINDEX_ROLE=gpu-worker)."
            )
    DATABASES = {"default": {"ENGINE": "django.db.backends.dummy"}}
DATABASES["default"]["CONN_MAX_AGE"] = _env(env.int, "CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend with a health check that costs no round trip on a healthy connection.
    DATABASES["default"]["ENGINE"] = "kernelindex.postgresql"
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes; the timeout rides out short locks.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "init_command": "PRAGMA journal_mode=WAL;"}
    )
    DATABASES["default"]["CONN_MAX_AGE"] = 0
if DATABASES["default"]["ENGINE"] == "kernelindex.postgresql" and _env(
    env.bool, "DATABASE_PREPARED_STATEMENTS", default=True
):
    # Planning a page's joins costs PostgreSQL more than running them (20-50 ms against 1-5 ms
    # for the run page at 100k runs, docs/performance.md): with server-side binding psycopg
    # prepares a query after 5 runs on a connection. Set 0 behind a transaction-mode pooler.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"server_side_binding": True, "prepare_threshold": 5}
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHE_URL = _env(env.str, "CACHE_URL", default="")
if CACHE_URL:
    CACHES = {"default": _env(env.cache_url, "CACHE_URL")}
    if CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache":
        CACHES["default"]["BACKEND"] = "kernelindex.redis_cache.RedisCache"  # one client per pool
        # Every cache key (pages, the generation, sessions) starts "web:", a pattern no GPU worker's
        # Redis ACL user is given (docs/deploy.md, "Grants"); values are signed (redis_cache.py).
        # django-environ leaves `?key_prefix=NAME` as a lower-case key Django does not read.
        CACHES["default"]["KEY_PREFIX"] = CACHES["default"].pop("key_prefix", "") or "web"
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

# Anonymous visitors get stored copies of public pages and API reads for this many seconds, until
# the next registry change (registry/cache.py); 0 turns the page cache off.
PAGE_CACHE_SECONDS = _env(env.int, "PAGE_CACHE_SECONDS", default=86400)
# Each web process keeps its own copies of the pages it served last, up to this many MB, and
# serves one while the registry's generation is the one it was stored under (registry/cache.py).
PAGE_CACHE_LOCAL_MB = _env(env.int, "PAGE_CACHE_LOCAL_MB", default=64)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Django's and allauth's, with the user's row read by SQL compiled once (kernelindex/auth.py).
AUTHENTICATION_BACKENDS = [
    "kernelindex.auth.ModelBackend",
    "kernelindex.auth.AuthenticationBackend",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
if DEBUG:
    # runserver and the tests serve static files through the finders, but WhiteNoise still reads
    # STATIC_ROOT (filled by collectstatic in production) and warns on every start when it is missing.
    STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").exists() else []
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "kernelindex.storage.IncrementalCompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
# Source maps (Swagger UI's and ReDoc's, 7 MB of the 12 MB collected) are fetched only by a
# browser's developer tools: served as they are, not compressed at every collectstatic, which
# halves its CPU on a fresh folder (44 s to 20 s of user CPU, 2026-12-07, this 2-core machine).
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = (*whitenoise.compress.Compressor.SKIP_COMPRESS_EXTENSIONS, "map")
MEDIA_ROOT = VAR_DIR / "media"
# No page takes a file, and the largest form (an attestation) is a few kilobytes: a longer body is
# refused with 413 from its Content-Length (kernelindex.middleware), uploads included, before
# nginx's limit (deploy/nginx) is ever reached.
REQUEST_BODY_MAX_BYTES = _env(env.int, "REQUEST_BODY_MAX_BYTES", default=1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_BODY_MAX_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = REQUEST_BODY_MAX_BYTES
# A reproduction's result file (the kit's JSON, every sample): larger ones are refused on arrival.
REPRODUCTION_FILE_MAX_BYTES = _env(env.int, "REPRODUCTION_FILE_MAX_BYTES", default=512 * 1024)
MEDIA_URL = "/media/"

# Email: console by default, a folder of .eml files with EMAIL_FILE_PATH, SMTP with EMAIL_URL.
EMAIL_URL = _env(env.str, "EMAIL_URL", default="")
if EMAIL_URL:
    vars().update(_env(env.email_url, "EMAIL_URL"))
else:
    EMAIL_FILE_PATH = _env(env.str, "EMAIL_FILE_PATH", default="")
    EMAIL_BACKEND = (
        "django.core.mail.backends.filebased.EmailBackend"
        if EMAIL_FILE_PATH
        else "django.core.mail.backends.console.EmailBackend"
    )
DEFAULT_FROM_EMAIL = _env(env.str, "DEFAULT_FROM_EMAIL", default="KernelIndex <noreply@kernelindex.local>")

# django-allauth
ACCOUNT_LOGIN_METHODS = {"email", "username"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
# The link in the confirmation mail signs the new user in (the same browser session that signed up).
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
ACCOUNT_RATE_LIMITS = {}  # None disables; {} keeps allauth's defaults on.
LOGIN_REDIRECT_URL = "/"
LOGIN_URL = "account_login"
ACCOUNT_EMAIL_SUBJECT_PREFIX = "[KernelIndex] "
# Submissions (attestations and issue reports) per user and per client address, "N/s|m|h|d".
ATTESTATIONS_SUBMISSION_LIMITS = {"user": "10/h", "ip": "30/h"}
# Rerun and measure requests (one admin action or measure form each) per moderator.
RERUN_REQUEST_LIMITS = {"user": _env(env.str, "RERUN_REQUEST_LIMIT", default="30/h")}
if GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET:
    SOCIALACCOUNT_PROVIDERS = {
        "github": {"APPS": [{"client_id": GITHUB_CLIENT_ID, "secret": GITHUB_CLIENT_SECRET}]}
    }

# Django REST framework
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "kernelindex.auth.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "kernelindex.pagination.Pagination",
    "DEFAULT_PARSER_CLASSES": [
        "kernelindex.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["kernelindex.throttling.AnonRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"anon": _env(env.str, "API_ANON_RATE", default="600/minute")},
}
# Rate limits key on the client's address. Behind N reverse proxies (the load balancer) it is
# the Nth from the right in X-Forwarded-For; with 0, the default, no header is trusted and it
# is REMOTE_ADDR (otherwise a client could rotate X-Forwarded-For to escape every IP limit).
TRUSTED_PROXY_COUNT = _env(env.int, "TRUSTED_PROXY_COUNT", default=0)
ALLAUTH_TRUSTED_PROXY_COUNT = TRUSTED_PROXY_COUNT
REST_FRAMEWORK["NUM_PROXIES"] = TRUSTED_PROXY_COUNT
SPECTACULAR_SETTINGS = {
    "TITLE": "KernelIndex API",
    "DESCRIPTION": "Public registry of GPU-kernel benchmark runs.",
    "VERSION": "1.0.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No deep links: Swagger UI draws each as a link inside the operation's expand button, a
    # control inside a control (axe-core's nested-interactive, serious, once per operation).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "SERVE_INCLUDE_SCHEMA": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "kernelindex.openapi.error_responses",  # 400/403/404/429, which every operation can answer
    ],
}

# Attestations and rerun jobs both have "kind" and "state" choice sets: name each one.
SPECTACULAR_SETTINGS.setdefault("ENUM_NAME_OVERRIDES", {}).update(
    {
        "JobKindEnum": "registry.reruns.models.JobKind.choices",
        "JobStateEnum": "registry.reruns.models.JobState.choices",
        "AttestationKindEnum": "attestations.models.AttestationKind.choices",
        "AttestationStateEnum": "attestations.models.AttestationState.choices",
        "IssueReportStateEnum": "attestations.models.IssueReportState.choices",
        "IssueReportCategoryEnum": "attestations.models.IssueReportCategory.choices",
    }
)

# Celery: the embedded default is kombu's filesystem transport, which needs no server.
CELERY_BROKER_URL = _env(env.str, "CELERY_BROKER_URL", default="filesystem://localhost/")
if CELERY_BROKER_URL == "filesystem://":
    # The transport ignores the host, but kombu warns "No hostname was supplied" on every send.
    CELERY_BROKER_URL = "filesystem://localhost/"
CELERY_BROKER_TRANSPORT_OPTIONS = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("out", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    # kombu's transport with whole-or-nothing messages (kernelindex/broker.py: kombu issue #1551).
    CELERY_BROKER_TRANSPORT = "kernelindex.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # A directory listing every 0.1 s: kombu's default 1 s would leave a GPU idle up to a
        # second between jobs of one or two seconds (the sweep, registry/reruns/sweep/).
        "polling_interval": 0.1,
    }
else:
    # Longer than the longest job, so Redis does not hand a running job to a second worker.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": _env(env.int, "CELERY_VISIBILITY_TIMEOUT", default=7200)
    }
    # Every broker key (queues, kombu's unacked bookkeeping, bindings) under a prefix: two
    # deployments, or two parallel test workers (tests/settings.py), can share one Redis database.
    _broker_key_prefix = _env(env.str, "CELERY_BROKER_KEY_PREFIX", default="")
    if _broker_key_prefix:
        CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = _broker_key_prefix
CELERY_TASK_ALWAYS_EAGER = _env(env.bool, "CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 3600
CELERY_TASK_SOFT_TIME_LIMIT = 3300
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_IGNORE_RESULT = True

# One JSON object a line in production (LOG_FORMAT=json, the default when DEBUG is off), with the
# request id, Celery task id and job id on every line; readable text in development.
LOG_FORMAT = _env(env.str, "LOG_FORMAT", default="text" if DEBUG else "json")
if LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured("Environment variable LOG_FORMAT is invalid: use json or text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "kernelindex.logging.ContextFilter"}},
    "formatters": {
        "json": {"()": "kernelindex.logging.JsonFormatter"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s%(task_id)s] %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["context"], "formatter": LOG_FORMAT}
    },
    "root": {"handlers": ["console"], "level": _env(env.str, "LOG_LEVEL", default="INFO")},
    # Django's own console handler (DEBUG only) would print each request warning a second time.
    "loggers": {"django": {"handlers": [], "level": "INFO", "propagate": True}},
}

# Production hardening, on whenever DEBUG is off.
if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = _env(env.bool, "SECURE_SSL_REDIRECT", default=True)
    SESSION_COOKIE_SECURE = _env(env.bool, "SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = _env(env.bool, "CSRF_COOKIE_SECURE", default=True)
    SECURE_HSTS_SECONDS = _env(env.int, "SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
CSRF_COOKIE_HTTPONLY = True
SESSION_COOKIE_HTTPONLY = True
# Read from the cache, written through to the database: a signed-in page served from the page
# cache then costs one database query for the user instead of two (registry/cache.py).
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
# Everything is served from the site itself; no plugin, base-tag or framing tricks.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],  # style attributes in server-drawn SVG charts
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

# Changes between consecutive values of a series (registry.services.changes): a step counts when
# the medians differ by at least CHANGE_THRESHOLD (relative) and, for controlled runs with raw
# samples, a Mann-Whitney test gives p <= CHANGE_P_VALUE (asv's rule).
CHANGE_THRESHOLD = _env(env.float, "CHANGE_THRESHOLD", default=0.05)
CHANGE_P_VALUE = _env(env.float, "CHANGE_P_VALUE", default=0.002)

# Controlled reruns (registry.reruns.services). A rerun agrees when the 95% interval of the
# relative difference of the two medians lies wholly within ±RERUN_TOLERANCE (docs/protocol.md).
RERUN_TOLERANCE = _env(env.float, "RERUN_TOLERANCE", default=0.02)
# KernelIndex's timing protocol, defined once in the harness (registry/reruns/harness/timing.py,
# DEFAULT_SETTINGS), with the time budget from the environment.
CONTROLLED_TIMING_BUDGET = _env(env.float, "CONTROLLED_TIMING_BUDGET", default=TIMING_DEFAULTS["budget_s"])
CONTROLLED_TIMING = {**TIMING_DEFAULTS, "budget_s": CONTROLLED_TIMING_BUDGET}
JOB_HARNESS_TIMEOUT = _env(env.float, "JOB_HARNESS_TIMEOUT", default=1800.0)
JOB_HEARTBEAT_INTERVAL = _env(env.float, "JOB_HEARTBEAT_INTERVAL", default=15.0)
JOB_STALE_AFTER = _env(env.float, "JOB_STALE_AFTER", default=120.0)
JOB_MAX_ATTEMPTS = _env(env.int, "JOB_MAX_ATTEMPTS", default=3)
JOB_RESEND_AFTER = _env(env.float, "JOB_RESEND_AFTER", default=3600.0)
# A running job whose worker sent its result is not lost for this long, heartbeat or not: the result
# may be queued behind other tasks of the default worker. Past it, the result is taken as lost.
JOB_RESULT_DEADLINE = _env(env.float, "JOB_RESULT_DEADLINE", default=900.0)
if JOB_STALE_AFTER <= 2 * JOB_HEARTBEAT_INTERVAL:
    raise ImproperlyConfigured("JOB_STALE_AFTER must be more than twice JOB_HEARTBEAT_INTERVAL.")
if not CELERY_BROKER_URL.startswith("filesystem://"):
    # A lost message (worker killed before its late ack) comes back once it is older than the
    # visibility timeout; kombu looks for such messages every interval × throttle seconds
    # (10 × 10 by default, so ~100 s). The timeout must outlast the longest job.
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        {
            "unacked_restore_interval": _env(env.int, "CELERY_UNACKED_RESTORE_INTERVAL", default=10),
            # Scan on every interval (kombu's default, 10, scans every 10th: ~100 s); the scan
            # is one ZRANGE under a mutex. The reconciler below is the quicker path back.
            "unacked_restore_throttle": _env(env.int, "CELERY_UNACKED_RESTORE_THROTTLE", default=1),
        }
    )
    # Only the fault test that runs a job longer than the visibility timeout on purpose sets this.
    _visibility_unchecked = _env(env.bool, "CELERY_VISIBILITY_TIMEOUT_UNCHECKED", default=False)
    if (
        CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] <= JOB_HARNESS_TIMEOUT
        and not _visibility_unchecked
    ):
        raise ImproperlyConfigured(
            "CELERY_VISIBILITY_TIMEOUT must be longer than JOB_HARNESS_TIMEOUT (the longest job)."
        )
# The reconciler's deadline: a job whose worker was lost is back in its queue within
# JOB_STALE_AFTER + JOB_RECONCILE_INTERVAL seconds (3 minutes by default).
JOB_RECONCILE_INTERVAL = _env(env.float, "JOB_RECONCILE_INTERVAL", default=60.0)
CELERY_BEAT_SCHEDULE = {
    "jobs-reconcile": {
        "task": "registry.jobs_reconcile",
        "schedule": JOB_RECONCILE_INTERVAL,
        "options": {"queue": "default"},
    },
}
# Job messages (and the leases the central worker grants) carry an Ed25519 signature made with a
# key derived from JOB_SIGNING_KEY, which only the web tier and the central worker hold; GPU workers
# run nothing else and hold only JOB_VERIFY_KEY, the public half (`manage.py worker_key job-key`
# prints it). Set a signing key of its own in production (at least 32 characters); the default is
# derived from SECRET_KEY. registry/reruns/services/signing.py.
JOB_SIGNING_KEY = _env(env.str, "JOB_SIGNING_KEY", default="")
if JOB_SIGNING_KEY and len(JOB_SIGNING_KEY) < 32:
    raise ImproperlyConfigured("Environment variable JOB_SIGNING_KEY is invalid: use at least 32 characters.")
if GPU_WORKER and JOB_SIGNING_KEY:
    raise ImproperlyConfigured("JOB_SIGNING_KEY must not be given to a GPU worker: give it JOB_VERIFY_KEY.")
if not GPU_WORKER:
    JOB_SIGNING_KEY = JOB_SIGNING_KEY or hashlib.sha256(f"job-signing:{SECRET_KEY}".encode()).hexdigest()
JOB_VERIFY_KEY = _env(env.str, "JOB_VERIFY_KEY", default="")
if GPU_WORKER and not JOB_VERIFY_KEY:
    raise ImproperlyConfigured("Environment variable JOB_VERIFY_KEY is required on a GPU worker.")
# A GPU worker's own identity: the name its key was registered under (`manage.py worker_key
# register`) and the file holding its Ed25519 private key (`manage.py worker_key generate`).
WORKER_NAME = _env(env.str, "WORKER_NAME", default="")
WORKER_KEY_FILE = _env(env.str, "WORKER_KEY_FILE", default="")
# How long a GPU worker waits for the central worker to grant a claim before it tries again later.
JOB_CLAIM_WAIT = _env(env.float, "JOB_CLAIM_WAIT", default=60.0)
# Claims are answered through Celery's result backend (the broker's Redis, or files beside the
# embedded broker); every other task ignores its result.
if CELERY_BROKER_URL.startswith("filesystem://"):
    (VAR_DIR / "celery-results").mkdir(parents=True, exist_ok=True)
    CELERY_RESULT_BACKEND = f"file://{VAR_DIR / 'celery-results'}"
else:
    CELERY_RESULT_BACKEND = CELERY_BROKER_URL
CELERY_RESULT_EXPIRES = 3600
# A worker that loses Redis keeps trying to reconnect (forever, not 100 times), and says so.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Take the write lock at BEGIN: two concurrent requests then serialise cleanly (the second
    # sees the first's job) instead of failing with "database is locked" on a stale snapshot.
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"


# Operations (docs/deploy.md): upstream sync, health, metrics.
PYPI_URL = _env(env.str, "PYPI_URL", default="https://pypi.org")
PYPI_TIMEOUT = _env(env.int, "PYPI_TIMEOUT", default=60)
LIGER_SYNC_DAILY = _env(env.bool, "LIGER_SYNC_DAILY", default=False)
LIGER_SYNC_HOUR = _env(env.int, "LIGER_SYNC_HOUR", default=4)
if LIGER_SYNC_DAILY:
    from celery.schedules import crontab

    CELERY_BEAT_SCHEDULE["liger-sync-daily"] = {
        "task": "registry.sync_liger",
        "schedule": crontab(hour=LIGER_SYNC_HOUR, minute=17),
        "options": {"queue": "default", "expires": 6 * 3600},
    }
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
OPERATIONS_INSPECT_TIMEOUT = _env(env.float, "OPERATIONS_INSPECT_TIMEOUT", default=1.0)
# /metrics answers a bearer token (METRICS_TOKEN); without one, only direct loopback requests.
METRICS_TOKEN = _env(env.str, "METRICS_TOKEN", default="")
PROMETHEUS_EXPORT_MIGRATIONS = False
# Load balancers probe over plain HTTP by address.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
