"""Walking the URL resolver, and requesting a route as a role with nothing kept afterwards."""

import re

from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialAccount, SocialApp, SocialToken
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.contrib.sites.models import Site
from django.core.cache import cache
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver

from attestations.models import AuditEntry
from registry.models import BenchmarkRun, SourceImport, SourceSync
from registry.reruns.models import MeasuredCeiling, WorkerKey
from tests.security.conftest import ROLES

API_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
PAGE_METHODS = ("GET", "POST")


def all_routes() -> list[str]:
    """Every URL pattern the project serves, as `ResolverMatch.route` spells it."""

    def walk(resolver, prefix=""):
        for pattern in resolver.url_patterns:
            route = URLResolver._join_route(prefix, str(pattern.pattern))
            if isinstance(pattern, URLResolver):
                yield from walk(pattern, route)
            elif isinstance(pattern, URLPattern):
                yield route

    return list(dict.fromkeys(walk(get_resolver())))


def methods_for(route: str) -> tuple[str, ...]:
    return API_METHODS if route.startswith("api/") else PAGE_METHODS


def fill(template: str, values: dict) -> str:
    """`runs/{run}/` → `/runs/17/`: placeholders name objects of the matrix's world."""
    return "/" + re.sub(r"\{([\w.]+)\}", lambda m: str(values[m.group(1)]), template)


def request_as(world, role: str, method: str, path: str, client_cache: dict) -> int:
    """One request, whose database effects are rolled back, so every cell of the matrix sees
    the same world (an approval by one role must not publish the object to the next)."""
    client = client_cache.get(role)
    if client is None:
        client = client_cache[role] = world.client(role, raise_request_exception=False)
    cookies = client.cookies
    client.cookies = type(cookies)(cookies)  # a logout clears the jar; the next cell needs it
    cache.clear()  # rate-limit counters: each cell starts from none
    with transaction.atomic():
        response = getattr(client, method.lower())(path)
        transaction.set_rollback(True)
    client.cookies = cookies
    return response.status_code


def observe(world, route: str, template: str, values: dict, client_cache: dict) -> dict[str, str]:
    path = fill(template, values)
    return {
        method: " ".join(str(request_as(world, role, method, path, client_cache)) for role in ROLES)
        for method in methods_for(route)
    }


def path_values(world) -> dict:
    """What each placeholder of a matrix path stands for: the world's objects, and one real
    object of every model the admin registers."""
    run = world.run
    owner = world.users["owner"]
    return {
        "run": run.pk,
        "memory_run": world.memory_run.pk,
        "digest": run.digest,
        "comparison_key": run.comparison_key,
        "kernel_slug": run.kernel.slug,
        "gpu_slug": run.environment.slug,
        "provider": run.implementation.provider,
        "source_slug": run.source.slug,
        "implementation": run.implementation_id,
        "environment": run.environment_id,
        "attestation": world.attestation.pk,
        "report": world.report.pk,
        "job": world.job.pk,
        "run_content_type": ContentType.objects.get_for_model(BenchmarkRun).pk,
        "auth.group": Group.objects.get(name="moderators").pk,
        "auth.user": owner.pk,
        "sites.site": Site.objects.get_current().pk,
        "authtoken.tokenproxy": owner.pk,  # the admin's token pages are keyed by user
        "account.emailaddress": EmailAddress.objects.get(user=owner).pk,
        "socialaccount.socialapp": SocialApp.objects.get().pk,
        "socialaccount.socialtoken": SocialToken.objects.get().pk,
        "socialaccount.socialaccount": SocialAccount.objects.get().pk,
        "reruns.rerunjob": world.job.pk,
        "registry.source": run.source_id,
        "registry.sourcesync": SourceSync.objects.get().pk,
        "reruns.measuredceiling": MeasuredCeiling.objects.get().pk,
        "reruns.workerkey": WorkerKey.objects.get().pk,
        "registry.sourceimport": SourceImport.objects.first().pk,
        "registry.kernel": run.kernel_id,
        "registry.implementation": run.implementation_id,
        "registry.workload": run.workload_id,
        "registry.protocol": run.protocol_id,
        "registry.environment": run.environment_id,
        "registry.benchmarkrun": run.pk,
        "attestations.attestation": world.attestation.pk,
        "attestations.issuereport": world.report.pk,
        "attestations.auditentry": AuditEntry.objects.first().pk,
    }
