"""The project's URL list is ordered for speed, not for meaning: Django tries its entries in order,
and the API and the registry's pages, which nearly every request asks for, come first. That is
safe only while no path matches two entries; this checks it for a path of every route."""

import re

import pytest
from django.urls import Resolver404, resolve

from kernelindex import urls
from tests.security.routes import all_routes

# A value each path converter of the project accepts.
SAMPLES = {
    "int": "17",
    "slug": "geglu",
    "str": "kernelindex-kit.tar.gz",
    "path": "a/b",
    "digest": "sha256:" + "a" * 64,
    "card": "GPU-34250b52",
    "drf_format_suffix": ".json",
}


def plain(route: str) -> str:
    """A route as written with `path()`: DRF's router writes its routes as regexes."""
    return route.replace("^", "").removesuffix("$")


def entry_names() -> list[str]:
    """Each entry of the project's URL list by the module it includes ("" for a view)."""
    return [getattr(getattr(entry, "urlconf_module", None), "__name__", "") for entry in urls.urlpatterns]


def sample_paths() -> list[tuple[str, str]]:
    """(route, a path that route matches) for every route the project serves."""
    found = []
    for route in map(plain, all_routes()):
        if "(?P" in route or "\\" in route:
            continue  # a regular expression route (the admin's own)
        path = re.sub(r"<(?:(\w+):)?\w+>", lambda m: SAMPLES[m.group(1) or "str"], route)
        found.append((route, path))
    return found


def entries_matching(path: str) -> list[int]:
    matching = []
    for index, entry in enumerate(urls.urlpatterns):
        try:
            if entry.resolve(path) is not None:
                matching.append(index)
        except Resolver404:
            pass
    return matching


def test_the_apis_and_the_registrys_entries_are_tried_first():
    """The API's entries leave a page's path at their prefix; the registry's include holds the
    pages, tried before the attestations', the jobs' and the kit's."""
    assert entry_names()[:4] == [
        "registry.api_urls",
        "attestations.api_urls",
        "registry.reruns.api_urls",
        "registry.urls",
    ]
    assert all(str(entry.pattern) == "api/v1/" for entry in urls.urlpatterns[:3])


def admin_site() -> int:
    """The admin site's entry: its catch-all answers any path under admin/, the project's own
    admin pages (listed before it) included."""
    return next(i for i, entry in enumerate(urls.urlpatterns) if str(entry.pattern) == "admin/")


@pytest.mark.parametrize(("route", "path"), sample_paths(), ids=lambda value: value)
def test_each_route_is_reached_and_by_one_entry_only(route, path):
    assert plain(resolve("/" + path).route) == route
    matching = entries_matching(path)
    assert set(matching[1:]) <= {admin_site()}, (
        f"/{path} (route {route}) matches entries {matching} of kernelindex/urls.py"
    )


def test_a_path_two_entries_match_is_caught(monkeypatch):
    """The check above finds a shadowed route: the same include listed twice."""
    registry = entry_names().index("registry.urls")
    monkeypatch.setattr(urls, "urlpatterns", [urls.urlpatterns[registry], *urls.urlpatterns])
    assert entries_matching("kernels/geglu/") == [0, registry + 1]
