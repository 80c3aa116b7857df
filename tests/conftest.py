"""Fixtures for every test: the page cache emptied, the harness fetched for worker tests, and the
roles (contributors, a moderator, a superuser), each defined here once."""

import fcntl
import importlib
import os

import pytest
from allauth.account.models import EmailAddress
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.cache import cache
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from attestations import services
from registry.reruns.harness.upstream import harness_dir, harness_fetch

PASSWORD = "correct-horse-battery-staple-42"

# Hypothesis's timing checks (a 200 ms deadline per example, a health check on slow generation)
# fail property tests on two cores shared with other suites; timing belongs in benchmarks. The
# number of examples stays Hypothesis's default, or what a test sets; the profile builds on the one
# loaded (Hypothesis's own `ci` profile where CI is set).
hypothesis_settings.register_profile(
    "kernelindex", hypothesis_settings(), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("kernelindex")

# --- parallel workers (pytest-xdist, `scripts/dev.py test` runs two) ---------------------------

# The modules that take longest (docs/performance.md, "The test suite"), started first so that the
# two workers finish together instead of one running a three-minute test alone at the end.
SLOWEST_FIRST = (
    "tests/sources/test_everything_that_ships.py",
    "tests/docs/test_commands.py",
    "tests/reruns/test_controlled_sweep.py",
    "tests/browser/test_pages_on_a_phone.py",
    "tests/security/test_api_fuzz.py",
    "tests/browser/test_kernelbench_in_chromium.py",
    "tests/site/test_rank_status_bundled.py",
    "tests/harness/test_controlled_runs.py",
    "tests/harness/test_cpu_runs.py",
    "tests/ops/test_gunicorn_restarts.py",
)
SHARED_SCOPES = ("module", "package", "class")


def _shared_setup(item) -> bool:
    """Whether the test uses a fixture kept for its module or class (a whole load of the bundled
    data, a Celery worker, a virtual environment): under xdist such a module runs on one worker,
    so the set-up is made once, not once per worker that gets some of its tests."""
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        for definition in definitions:
            ours = getattr(definition.func, "__module__", "").startswith("tests.")
            if ours and definition.scope in SHARED_SCOPES:
                return True
    return False


def _xdist_worker() -> bool:
    """Whether this process is a pytest-xdist worker: the workers collect the tests, and the
    controller schedules them in the order and groups the workers give."""
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


def pytest_itemcollected(item):
    """Under xdist (`--dist loadgroup`), each module with shared set-up is one group, sent whole to
    one worker."""
    if _xdist_worker() and getattr(item, "module", None) is not None and _shared_setup(item):
        item.add_marker(pytest.mark.xdist_group(item.module.__name__))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under xdist, the slowest modules first; without it the order stays pytest-django's."""
    if not _xdist_worker():
        return

    def rank(item):
        path = item.nodeid.split("::", 1)[0]
        return SLOWEST_FIRST.index(path) if path in SLOWEST_FIRST else len(SLOWEST_FIRST)

    items.sort(key=rank)  # stable: each module keeps its own order


@pytest.fixture(autouse=True)
def page_cache_empty():
    """Stored pages (registry/cache.py) live in the cache, outside the test's database
    transaction: each test starts with none, so no page rendered from another test's rows is
    served."""
    from registry.cache import local_pages

    cache.clear()
    local_pages.clear()
    yield


@pytest.fixture(scope="session")
def harness_root():
    """The pinned liger-kernel sdist, downloaded once into KERNELINDEX_HARNESS_DIR if missing;
    under a lock, since parallel workers (pytest-xdist) share that folder."""
    folder = harness_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".fetch.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return harness_fetch()


@pytest.fixture(autouse=True)
def harness_for_workers(request):
    """A test marked `worker` runs a real Celery worker, whose jobs run the real harness: it is
    fetched first, so such a test passes when run on its own on a fresh machine too."""
    if request.node.get_closest_marker("worker"):
        request.getfixturevalue("harness_root")


# --- roles ----------------------------------------------------------------------------------


def make_user(username: str, **extra):
    """A contributor as signing up makes one: a password and a verified primary e-mail address."""
    user = get_user_model().objects.create_user(
        username=username, email=f"{username}@example.org", password=PASSWORD, **extra
    )
    EmailAddress.objects.create(user=user, email=user.email, verified=True, primary=True)
    return user


MODERATOR_MIGRATIONS = [
    "attestations.migrations.0002_moderators_group",
    "registry.reruns.migrations.0002_moderators_request_reruns",
]


def moderators_group_ensure() -> Group:
    """The group as the data migrations leave it. A flush (transactional tests, other modules'
    teardown) removes rows that migrations created, so replay them the way `migrate` did."""
    if not Group.objects.filter(name=services.MODERATORS_GROUP).exists():
        for name in MODERATOR_MIGRATIONS:
            migration = importlib.import_module(name)
            (getattr(migration, "moderators_create", None) or migration.permissions_add)(django_apps, None)
    return Group.objects.get(name=services.MODERATORS_GROUP)


@pytest.fixture
def moderators_group(db):
    return moderators_group_ensure()


@pytest.fixture
def contributor(db):
    return make_user("ada")


@pytest.fixture
def other_contributor(db):
    return make_user("grace")


@pytest.fixture
def moderator(moderators_group):
    """A member of the `moderators` group, as `moderator_add` makes one (staff, no right to edit
    runs or jobs by hand)."""
    user = make_user("mod")
    services.moderator_add(user=user)
    return get_user_model().objects.get(pk=user.pk)  # a fresh instance: no stale permission cache


@pytest.fixture
def superuser(db):
    return get_user_model().objects.create_superuser("root", "root@example.org", "pw")


@pytest.fixture
def contributor_client(client, contributor):
    client.force_login(contributor)
    return client


@pytest.fixture
def moderator_client(client, moderator):
    client.force_login(moderator)
    return client
