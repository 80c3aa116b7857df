"""The changes page, its API endpoint and the Atom feed of regressions: steps between consecutive
values of a series (registry.services.changes), newest first, each with the upstream commit and
pull request whose version first published the new value."""

import django_filters
from django.conf import settings
from django.contrib.syndication.views import Feed
from django.core.paginator import Paginator
from django.db.models import Subquery
from django.shortcuts import render
from django.urls import reverse
from django.utils.feedgenerator import Atom1Feed
from django.views.decorators.http import require_safe
from drf_spectacular.utils import extend_schema_field
from rest_framework import mixins, serializers, viewsets

from registry.filters import FormClassOnce, SafeForm, TextFilter, UtcIsoDateTimeFilter, WholeNumberFilter
from registry.models import BenchmarkRun, Change, ChangeKind, Metric, TimedPass

PAGE_SIZE = 50
FEED_SIZE = 50
# The rows a change shows: the two runs' figures, not their manifests or spec documents.
DEFERRED = tuple(
    f"{run}__{field}"
    for run in ("before", "after")
    for field in ("manifest", "source_metrics", "labels", "correctness_note")
) + ("after__workload__spec", "after__workload__tensors", "after__workload__parameters")


def changes_public():
    """What the changes page, the API and the feed start from."""
    return (
        Change.objects.select_related(
            "kernel", "before", "after", "after__workload", "attributed_to", "attributed_to__source"
        )
        .defer(*DEFERRED)
        .order_by("-observed_at", "-pk")
    )


class ChangeFilter(FormClassOnce, django_filters.FilterSet):
    kernel = TextFilter(field_name="kernel__slug", help_text="Kernel slug, e.g. jsd.")
    gpu = TextFilter(
        field_name="after__environment__slug", help_text="GPU model slug, e.g. nvidia-h100-80gb-hbm3."
    )
    implementation = TextFilter(
        field_name="provider", help_text="Provider as the source names it, e.g. liger."
    )
    kind = django_filters.ChoiceFilter(choices=ChangeKind.choices)
    operation_mode = django_filters.ChoiceFilter(choices=TimedPass.choices)
    metric = django_filters.ChoiceFilter(choices=Metric.choices)
    pull_request = WholeNumberFilter(
        field_name="attributed_to__pull_request", min_value=1, max_value=2**31 - 1
    )
    series = WholeNumberFilter(
        method="filter_series",
        min_value=1,
        max_value=2**63 - 1,
        help_text="A run's id: the changes of its series (its comparison group and implementation).",
    )
    since = UtcIsoDateTimeFilter(
        field_name="observed_at", lookup_expr="gte", help_text="Observed at or after."
    )
    until = UtcIsoDateTimeFilter(field_name="observed_at", lookup_expr="lt", help_text="Observed before.")

    class Meta:
        model = Change
        fields = []
        form = SafeForm

    def filter_series(self, queryset, name, value):
        if not value:
            return queryset
        run = BenchmarkRun.objects.filter(pk=value)
        return queryset.filter(
            after__comparison_key=Subquery(run.values("comparison_key")[:1]),
            provider=Subquery(run.values("provider")[:1]),
        )


class ChangeRunSerializer(serializers.Serializer):
    """One side of a change, as the API gives it (for the schema)."""

    id = serializers.IntegerField()
    url = serializers.CharField()
    median = serializers.FloatField()
    p20 = serializers.FloatField(allow_null=True)
    p80 = serializers.FloatField(allow_null=True)
    unit = serializers.CharField()
    observed_at = serializers.DateTimeField()


class AttributionSerializer(serializers.Serializer):
    """The upstream version that first published a change's new value (for the schema)."""

    commit = serializers.CharField(allow_null=True)
    commit_url = serializers.CharField(allow_null=True)
    pull_request = serializers.IntegerField(allow_null=True)
    pull_request_url = serializers.CharField(allow_null=True)
    subject = serializers.CharField()
    date = serializers.DateTimeField(allow_null=True)
    release = serializers.CharField(allow_null=True)
    kernels_changed = serializers.ListField(child=serializers.CharField())


class ChangeSerializer(serializers.ModelSerializer):
    kernel = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    before = serializers.SerializerMethodField()
    after = serializers.SerializerMethodField()
    percent = serializers.FloatField(read_only=True)
    attribution = serializers.SerializerMethodField()

    class Meta:
        model = Change
        fields = [
            "id",
            "kernel",
            "provider",
            "gpu_product",
            "operation_mode",
            "metric",
            "kind",
            "ratio",
            "percent",
            "p_value",
            "evidence",
            "observed_at",
            "before",
            "after",
            "attribution",
        ]

    def _run(self, run):
        return {
            "id": run.pk,
            "url": run.get_absolute_url(),
            "median": run.median,
            "p20": run.p20,
            "p80": run.p80,
            "unit": run.unit,
            "observed_at": run.observed_at,
        }

    @extend_schema_field(ChangeRunSerializer)
    def get_before(self, change):
        return self._run(change.before)

    @extend_schema_field(ChangeRunSerializer)
    def get_after(self, change):
        return self._run(change.after)

    @extend_schema_field(AttributionSerializer(allow_null=True))
    def get_attribution(self, change):
        version = change.attributed_to
        if version is None:
            return None
        return {
            "commit": version.upstream_commit or None,
            "commit_url": version.commit_url or None,
            "pull_request": version.pull_request,
            "pull_request_url": version.pull_request_url or None,
            "subject": version.subject,
            "date": version.as_of,
            "release": version.release or None,
            "kernels_changed": version.kernels,
        }


class ChangeViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Changes between consecutive values of a series, newest first: improvement, regression or
    uncertain, with the ratio, the evidence and the upstream commit that published the new value."""

    queryset = changes_public()
    serializer_class = ChangeSerializer
    filterset_class = ChangeFilter


@require_safe
def change_list(request):
    """Every change, newest first, filtered by kernel, GPU, implementation, kind and date."""
    filterset = ChangeFilter(request.GET, queryset=changes_public())
    context = {
        "filterset": filterset,
        "page": None,
        "kinds": ChangeKind.choices,
        **_filter_choices(),
        "threshold_pct": f"{settings.CHANGE_THRESHOLD * 100:g}%",
        "p_value": f"{settings.CHANGE_P_VALUE:g}",
    }
    if not filterset.is_valid():
        return render(request, "registry/change_list.html", context, status=400)
    context["page"] = Paginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "registry/change_list.html", context)


def _filter_choices() -> dict:
    """What the page's filters offer: the kernels, GPU models and implementations that have a
    change (three queries, whatever the number of changes)."""
    public = changes_public().order_by()
    return {
        "kernel_choices": sorted(set(public.values_list("kernel__slug", "kernel__name")), key=lambda c: c[1]),
        "gpu_choices": sorted(
            set(public.values_list("after__environment__slug", "gpu_product")), key=lambda c: c[1]
        ),
        "implementation_choices": [(p, p) for p in sorted(set(public.values_list("provider", flat=True)))],
    }


def site_url(path: str) -> str:
    return settings.SITE_URL.rstrip("/") + path


class RegressionFeed(Feed):
    """Regressions, newest first; the changes page's filters narrow it (?kernel=jsd)."""

    feed_type = Atom1Feed
    title = "KernelIndex: regressions"
    subtitle = (
        "Steps between consecutive published values of one measurement that are both clear and "
        "at least the practical threshold, attributed to the upstream commit that published them."
    )

    # RFC 4287 wants an author for the feed (or for every entry): the registry itself.
    author_name = "KernelIndex"

    def author_link(self):
        return site_url("/")

    def get_object(self, request):
        filterset = ChangeFilter(request.GET, queryset=changes_public().filter(kind=ChangeKind.REGRESSION))
        return filterset.qs if filterset.is_valid() else Change.objects.none()

    def get_feed(self, obj, request):
        """Every URL in the feed is built on SITE_URL, the site's public address: Django's
        syndication would take the sites framework's domain (example.com) instead."""
        feed = super().get_feed(obj, request)
        feed.feed["feed_url"] = site_url(request.get_full_path())
        feed.feed["id"] = feed.feed["feed_url"]
        return feed

    def link(self):
        return site_url(reverse("registry:change-list") + "?kind=regression")

    def items(self, changes):
        return changes[:FEED_SIZE]

    def item_title(self, change):
        return (
            f"{change.kernel.name} {change.get_operation_mode_display().lower()} "
            f"{change.get_metric_display().lower()}, {change.provider} on {change.gpu_product}: "
            f"{change.percent:+.1f}%"
        )

    def item_description(self, change):
        version = change.attributed_to
        where = (
            f" Published upstream in {version.upstream_commit[:8]} (#{version.pull_request})."
            if version and version.upstream_commit
            else ""
        )
        return (
            f"{change.after.workload.summary}: {change.before.median:.4g} → {change.after.median:.4g} "
            f"{change.after.unit}. {change.evidence}.{where}"
        )

    def item_link(self, change):
        return site_url(change.after.get_absolute_url() + "#series")

    def item_guid(self, change):
        """An IRI, as RFC 4287 asks of an id, that never changes for the step between two runs."""
        return site_url(reverse("registry:change-list") + f"#change-{change.before_id}-{change.after_id}")

    item_guid_is_permalink = False

    def item_pubdate(self, change):
        return change.observed_at

    def item_updateddate(self, change):
        return change.attributed_to.as_of if change.attributed_to else change.observed_at
