"""The shared code knows the plug-in shape, never a member: a third source registers with one line
(here, through settings) and is loaded, counted and searched without any change to registry code."""

import pytest
from django.core.cache import cache
from django.test import override_settings

from registry.models import Kernel, Source
from registry.selectors import source_counts
from registry.sources import REGISTERED, bundled_load_all, plugin_for, plugins

pytestmark = pytest.mark.django_db
WITH_TOY = [*REGISTERED, "tests.sources.toy"]


def test_every_registered_source_has_the_same_parts():
    for plugin in plugins():
        assert plugin.licence.is_file() and plugin.provenance.is_file(), plugin.slug
        assert plugin.comparability and plugin.commands, plugin.slug
        module, _, function = plugin.bundled_loader.partition(":")
        assert callable(getattr(__import__(module, fromlist=[function]), function))


@override_settings(KERNELINDEX_SOURCES=["tests.sources.toy"])
def test_a_toy_source_is_loaded_and_counted_without_touching_registry_code():
    summaries = bundled_load_all()
    assert summaries == {"toy": "source created"}
    assert Source.objects.filter(slug="toy").exists()
    assert [row["slug"] for row in source_counts()] == ["toy"]
    assert bundled_load_all() == {"toy": "already there"}


@override_settings(KERNELINDEX_SOURCES=WITH_TOY)
def test_a_toy_source_is_found_by_slug_and_its_search_is_used(client):
    assert plugin_for("toy").baseline_provider == "slow"
    Kernel.objects.create(slug="plaything", name="Something else entirely")
    html = client.get("/search/", {"q": "toy"}).content.decode()
    assert "Something else entirely" in html  # neither its name nor its slug says "toy"
    cache.clear()  # the search page is stored; the registry did not change, the settings did
    with override_settings(KERNELINDEX_SOURCES=REGISTERED):
        assert "Something else entirely" not in client.get("/search/", {"q": "toy"}).content.decode()


def test_without_the_setting_the_toy_is_not_registered():
    assert plugin_for("toy") is None
    assert [p.slug for p in plugins()] == ["liger-kernel", "kernelbench"]
