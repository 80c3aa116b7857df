"""The run filters, shared by the site's pages, the API and the bulk export.

A bad value is a 400 with a message naming the parameter, never a 500: every field validates its
input strictly (booleans, dates, choices, `name:value` workload parameters) and no value reaches
the database with a NUL byte in it (PostgreSQL refuses those).
"""

import datetime
import re

import django_filters
from django import forms
from django.db.models import Exists, OuterRef
from django.db.models.fields.json import KeyTransform
from django_filters.fields import BaseCSVField
from drf_spectacular.utils import extend_schema_field

from registry.models import BenchmarkRun, EvidenceLevel, Metric, TimedPass
from registry.reruns.models import RerunJob

PARAMETER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,49}")
MAX_VALUE_LENGTH = 500
SORTS = (
    ("median", "median"),
    ("rank", "rank"),
    ("observed_at", "observed"),
    ("published_at", "published"),
    ("implementation__provider", "implementation"),
    ("environment__slug", "gpu"),
    ("operation_mode", "pass"),
    ("workload__x_value", "x"),
    ("sol_percent", "speed_of_light"),
    ("id", "id"),
)
TRUE_VALUES = {"true", "1", "yes", "on"}
FALSE_VALUES = {"false", "0", "no", "off"}


def parameter_value(raw: str) -> int | float | str:
    """A workload parameter as the manifest stores it: a JSON number where it reads as one."""
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        number = float(raw)
    except ValueError:
        return raw
    return number if number == number and abs(number) != float("inf") else raw


class ParameterField(forms.Field):
    """`name:value` pairs, repeated (`?param=T:8192&param=bsz:8`): one select per parameter
    in a plain GET form submits exactly this, so the filter works without JavaScript."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value):
        pairs = []
        for item in value or []:
            if not item:
                continue
            name, colon, raw = item.partition(":")
            if not colon or not PARAMETER_NAME.fullmatch(name) or not raw:
                raise forms.ValidationError(
                    "%(item)r is not a workload parameter filter; write name:value, e.g. T:8192.",
                    params={"item": item[:80]},
                )
            pairs.append((name, parameter_value(raw)))
        return pairs


@extend_schema_field(
    {
        "type": "array",
        "items": {
            "type": "string",
            "example": "T:8192",
            # What ParameterField takes: name:value, or an empty item (skipped).
            "pattern": "^([A-Za-z_][A-Za-z0-9_]{0,49}:[^\\x00]+)?$",
            "maxLength": MAX_VALUE_LENGTH,
        },
    }
)
class ParameterFilter(django_filters.Filter):
    field_class = ParameterField

    def filter(self, qs, value):
        for index, (name, wanted) in enumerate(value or []):
            alias = f"_parameter_{index}"
            # An explicit key transform: a parameter named like a lookup ("contains") stays a key.
            qs = qs.alias(**{alias: KeyTransform(name, "workload__parameters")}).filter(**{alias: wanted})
        return qs


@extend_schema_field({"type": "string", "maxLength": MAX_VALUE_LENGTH, "pattern": "^[^\\x00]*$"})
class TextFilter(django_filters.CharFilter):
    """A text filter as SafeForm bounds it: at most MAX_VALUE_LENGTH characters, no NUL byte."""


class WholeNumberField(forms.IntegerField):
    """An integer written as digits, with a minus sign if negative: Django's IntegerField also
    takes "406.0" and " 406 ", which the API's schema (an integer) does not allow."""

    def to_python(self, value):
        if value not in self.empty_values and not re.fullmatch(r"-?[0-9]+", str(value)):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


@extend_schema_field({"type": "integer"})
class WholeNumberFilter(django_filters.NumberFilter):
    """A whole number written as an integer (WholeNumberField); min_value and max_value bound it."""

    field_class = WholeNumberField


class UtcIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 date-time, turned into UTC before it reaches the database: Python takes UTC
    offsets up to ±23:59, PostgreSQL only up to ±15:59 (a 500 before this)."""

    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return None
        try:
            return value.astimezone(datetime.UTC)
        except OverflowError:  # past year 1 or 9999 once in UTC: the bound is the calendar's edge
            edge = datetime.datetime.min if value.year == 1 else datetime.datetime.max
            return edge.replace(tzinfo=datetime.UTC)


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class StrictBooleanField(forms.Field):
    def to_python(self, value):
        if value in (None, ""):
            return None
        text = str(value).strip().lower()
        if text in TRUE_VALUES:
            return True
        if text in FALSE_VALUES:
            return False
        raise forms.ValidationError(
            "%(value)r is not a boolean; use true or false.", params={"value": str(value)[:40]}
        )


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField


class SafeForm(forms.Form):
    """Refuses values the database cannot take before any field sees them."""

    def clean(self):
        for key in self.data:
            values = self.data.getlist(key) if hasattr(self.data, "getlist") else [self.data[key]]
            for value in values:
                if isinstance(value, str) and ("\x00" in value or len(value) > MAX_VALUE_LENGTH):
                    raise forms.ValidationError(
                        "The value of %(key)r is not allowed (too long or contains a NUL byte).",
                        params={"key": key[:40]},
                    )
        return super().clean()


class SortListField(BaseCSVField):
    """A comma-separated list of sort fields with no empty entries: `?sort=,,` or `?sort=median,`
    is a 400 naming the parameter, not a silent default order."""

    def clean(self, value):
        if value and any(not item.strip() for item in value):
            raise forms.ValidationError("Empty sort field: separate field names with single commas.")
        return super().clean(value)


class StableOrderingFilter(django_filters.OrderingFilter):
    """Ends every ordering with the id, so pages never repeat or skip runs with equal values.
    Sorted best first (lowest median, or rank), implausible runs come last: a figure faster than
    the GPU's speed of light is never the best."""

    base_field_class = SortListField

    def filter(self, qs, value):
        qs = super().filter(qs, value)
        if value:
            best_first = value[0] in ("median", "rank")
            qs = qs.order_by(*(("implausible",) if best_first else ()), *qs.query.order_by, "id")
        return qs


class FormClassOnce:
    """A filter set whose form class is built once per filter set class, not per request:
    django-filter makes a new form class on every request (a field for each filter, its label
    worked out from the model), which for the runs' two dozen filters cost nearly as much as the
    rest of filtering a page of runs (bench/filter_form.py: 1.24–1.44 ms of CPU a request, 0.67–0.85
    ms with the form class built once; 2026-12-07, 2-core x86_64). Every filter set of the project
    takes it (tests/registry/test_filter_form_once.py checks): their fields are the same for every
    request. A filter set whose choices came from the database, or whose queryset the request
    chose, would have to leave it out."""

    def get_form_class(self):
        form_class = type(self).__dict__.get("_form_class_once")  # this class's own, not a parent's
        if form_class is None:
            form_class = super().get_form_class()
            type(self)._form_class_once = form_class
        return form_class


class RunFilter(FormClassOnce, django_filters.FilterSet):
    kernel = TextFilter(field_name="kernel__slug", help_text="Kernel slug, e.g. geglu.")
    source = TextFilter(field_name="source__slug", help_text="Source slug, e.g. liger-kernel or kernelbench.")
    implementation = TextFilter(
        field_name="implementation__provider", help_text="Provider as the source names it, e.g. liger."
    )
    project = TextFilter(field_name="implementation__project", help_text="Project, e.g. Liger-Kernel.")
    gpu = TextFilter(field_name="environment__slug", help_text="GPU model slug, e.g. nvidia-a100-sxm4-80gb.")
    operation_mode = django_filters.ChoiceFilter(choices=TimedPass.choices, help_text="Timed pass.")
    metric = django_filters.ChoiceFilter(choices=Metric.choices)
    dtype = TextFilter(field_name="workload__dtype", help_text="e.g. bf16, fp32.")
    param = ParameterFilter(help_text="Workload parameter as name:value (e.g. T:8192); repeat for several.")
    evidence_level = django_filters.ChoiceFilter(choices=EvidenceLevel.choices)
    withdrawn = StrictBooleanFilter(
        help_text="true: only runs the source no longer lists; false: only runs it still lists (or replaced)."
    )
    current = StrictBooleanFilter(
        method="filter_current", help_text="true: only runs neither withdrawn nor superseded."
    )
    superseded = StrictBooleanFilter(
        field_name="superseded_by",
        lookup_expr="isnull",
        exclude=True,
        help_text="true: only runs a newer value of the same row replaced; false: only runs not replaced.",
    )
    pull_request = WholeNumberFilter(
        field_name="origin__pull_request",
        min_value=1,
        max_value=2**31 - 1,
        help_text="The upstream pull request whose version first published the run, e.g. 406.",
    )
    observed_after = UtcIsoDateTimeFilter(field_name="observed_at", lookup_expr="gte")
    observed_before = UtcIsoDateTimeFilter(field_name="observed_at", lookup_expr="lt")
    implausible = StrictBooleanFilter(
        help_text="true: only runs faster than their GPU's speed of light (or a peak below the memory "
        "that must be live); false: only the others."
    )
    host_bound = StrictBooleanFilter(
        method="filter_host_bound",
        help_text="true: only runs whose reruns were judged in the host-bound class (their figure includes "
        "the host's pace); false: only the others.",
    )
    external_id = TextFilter()
    digest = TextFilter()
    comparison_key = TextFilter()
    sort = StableOrderingFilter(fields=SORTS, help_text="Sort field; prefix - for descending.")

    class Meta:
        model = BenchmarkRun
        fields = []
        form = SafeForm

    def filter_host_bound(self, queryset, name, value):
        if value is None:
            return queryset
        bound = RerunJob.objects.filter(run=OuterRef("pk"), sampling__verdict_model__host_bound__gt="")
        return queryset.filter(Exists(bound)) if value else queryset.exclude(Exists(bound))

    def filter_current(self, queryset, name, value):
        if value is None:
            return queryset
        if value:
            return queryset.current()
        return queryset.exclude(withdrawn=False, superseded_by__isnull=True)
