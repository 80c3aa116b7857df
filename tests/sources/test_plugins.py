"""The shared code knows the plug-in shape, never a member: a third source is one folder and one
line of settings (here, INSTALLED_APPS extended by the test) and is loaded, counted, searched and
given its own manage.py command without any change to registry code."""

from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.management import call_command, get_commands
from django.test import modify_settings, override_settings

from registry.models import Kernel, Source
from registry.selectors import source_counts
from registry.sources import bundled_load_all, plugin_for, plugins, rerun_plugin

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
TOY = "tests.sources.toy"
WITH_TOY = modify_settings(INSTALLED_APPS={"append": TOY})
SOURCE_APPS = ["registry.sources.liger", "registry.sources.kernelbench"]
# The installed apps with the registered sources taken out: the toy alone.
ONLY_TOY = modify_settings(INSTALLED_APPS={"remove": SOURCE_APPS, "append": TOY})
PARTS = ("__init__.py", "apps.py", "management/commands/__init__.py", "data/LICENSE", "data/SOURCE.md")


def test_every_registered_source_has_the_same_parts():
    for plugin in plugins():
        folder = Path(__import__(plugin.package, fromlist=["SOURCE"]).__file__).parent
        assert [part for part in PARTS if not (folder / part).is_file()] == [], plugin.slug
        assert plugin.licence.is_file() and plugin.provenance.is_file(), plugin.slug
        assert plugin.comparability and plugin.commands, plugin.slug
        module, _, function = plugin.bundled_loader.partition(":")
        assert callable(getattr(__import__(module, fromlist=[function]), function))


def test_a_sources_commands_are_those_of_its_own_folder():
    commands = get_commands()
    for plugin in plugins():
        assert {commands[name] for name in plugin.commands} == {plugin.package}, plugin.slug
    assert not (ROOT / "registry" / "management" / "commands" / "import_liger.py").exists()


def test_the_rerun_jobs_measure_one_sources_workloads():
    assert rerun_plugin().slug == "liger-kernel"


@ONLY_TOY
def test_a_toy_source_is_loaded_and_counted_without_touching_registry_code():
    summaries = bundled_load_all()
    assert summaries == {"toy": "source created"}
    assert Source.objects.filter(slug="toy").exists()
    assert [row["slug"] for row in source_counts()] == ["toy"]
    assert bundled_load_all() == {"toy": "already there"}


@WITH_TOY
def test_a_toy_source_adds_its_own_command():
    assert get_commands()["import_toy"] == TOY
    assert plugin_for("toy").commands == ("import_toy",)
    call_command("import_toy")
    assert Source.objects.filter(slug="toy").exists()


@WITH_TOY
def test_a_toy_source_is_found_by_slug_and_its_search_is_used(client):
    assert [p.slug for p in plugins()] == ["liger-kernel", "kernelbench", "toy"]
    assert plugin_for("toy").baseline_provider == "slow"
    Kernel.objects.create(slug="plaything", name="Something else entirely")
    html = client.get("/search/", {"q": "toy"}).content.decode()
    assert "Something else entirely" in html  # neither its name nor its slug says "toy"
    cache.clear()  # the search page is stored; the registry did not change, the settings did
    with modify_settings(INSTALLED_APPS={"remove": [TOY]}):
        assert "Something else entirely" not in client.get("/search/", {"q": "toy"}).content.decode()


def test_the_toy_is_registered_by_settings_alone():
    """No file of the site names the toy: the test's settings are its only registration."""
    named = [
        str(path.relative_to(ROOT))
        for top in ("registry", "kernelindex", "attestations")
        for path in (ROOT / top).rglob("*.py")
        if TOY in path.read_text(encoding="utf-8")
    ]
    assert named == []
    assert plugin_for("toy") is None
    assert "import_toy" not in get_commands()
    assert [p.slug for p in plugins()] == ["liger-kernel", "kernelbench"]


@override_settings(INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"])
def test_with_no_source_installed_there_is_no_rerun_source():
    with pytest.raises(LookupError):
        rerun_plugin()
