"""The runs' and jobs' filter sets build their form class once (registry/filters.py,
FormClassOnce): every request gets the same form class, yet its own form, data and errors; a
subclass builds its own form class rather than reusing its parent's."""

import django_filters
from django.http import QueryDict

from registry.filters import FormClassOnce, RunFilter, TextFilter
from registry.models import BenchmarkRun
from registry.reruns.api import JobFilter


def test_two_requests_share_the_form_class_and_keep_their_own_data_and_errors():
    good = RunFilter(QueryDict("kernel=geglu&sort=median"), queryset=BenchmarkRun.objects.none())
    bad = RunFilter(QueryDict("sort=,,&observed_after=yesterday"), queryset=BenchmarkRun.objects.none())
    assert type(good.form) is type(bad.form)
    assert good.form is not bad.form
    assert good.is_valid() and good.form.cleaned_data["kernel"] == "geglu"
    assert not bad.is_valid() and set(bad.form.errors) == {"sort", "observed_after"}
    assert good.is_valid(), "a later request's errors must not reach an earlier request's form"


def test_the_jobs_filter_builds_its_form_once_too():
    first = JobFilter(QueryDict("state=succeeded"))
    second = JobFilter(QueryDict("state=no-such-state"))
    assert type(first.form) is type(second.form)
    assert first.is_valid() and not second.is_valid() and "state" in second.form.errors


def test_a_subclass_builds_its_own_form_class():
    class Parent(FormClassOnce, django_filters.FilterSet):
        kernel = TextFilter(field_name="kernel__slug")

        class Meta:
            model = BenchmarkRun
            fields = []

    class Child(Parent):
        gpu = TextFilter(field_name="environment__slug")

    parent_form = Parent(QueryDict("")).form
    child_form = Child(QueryDict("")).form
    assert set(parent_form.fields) == {"kernel"}
    assert set(child_form.fields) == {"kernel", "gpu"}
    assert type(Parent(QueryDict("")).form) is type(parent_form)


def project_filter_sets() -> list[type]:
    """Every filter set class defined in the project's own apps (the URL list imports them all)."""
    import kernelindex.urls  # noqa: F401

    found, todo = [], [django_filters.filterset.BaseFilterSet]
    while todo:
        for subclass in todo.pop().__subclasses__():
            todo.append(subclass)
            if subclass.__module__.startswith(("registry.", "attestations.")):
                found.append(subclass)
    return found


def test_every_filter_set_of_the_project_builds_its_form_once():
    found = {cls.__name__ for cls in project_filter_sets()}
    assert {"RunFilter", "JobFilter", "ChangeFilter", "GroupFilter"} <= found
    assert [cls.__qualname__ for cls in project_filter_sets() if not issubclass(cls, FormClassOnce)] == []
