import django_filters

from registry.models import BenchmarkRun, EvidenceLevel, Metric, TimedPass


class RunFilter(django_filters.FilterSet):
    kernel = django_filters.CharFilter(field_name="kernel__slug")
    implementation = django_filters.CharFilter(field_name="implementation__provider")
    gpu = django_filters.CharFilter(field_name="environment__slug")
    operation_mode = django_filters.ChoiceFilter(choices=TimedPass.choices)
    metric = django_filters.ChoiceFilter(choices=Metric.choices)
    evidence_level = django_filters.ChoiceFilter(choices=EvidenceLevel.choices)
    withdrawn = django_filters.BooleanFilter()
    external_id = django_filters.CharFilter()
    digest = django_filters.CharFilter()
    comparison_key = django_filters.CharFilter()

    class Meta:
        model = BenchmarkRun
        fields = []
