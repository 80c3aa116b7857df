from django.http import HttpResponse
from rest_framework import viewsets
from rest_framework.decorators import action

from registry import digests
from registry.filters import RunFilter
from registry.models import BenchmarkRun
from registry.serializers import RunSerializer


class RunViewSet(viewsets.ReadOnlyModelViewSet):
    """Benchmark runs, each with its rank in its comparison group and its digest."""

    queryset = BenchmarkRun.objects.public().order_by("pk")
    serializer_class = RunSerializer
    filterset_class = RunFilter

    @action(detail=True, methods=["get"])
    def manifest(self, request, pk=None):
        """The run's canonical manifest (RFC 8785 bytes; their sha256 is the run's digest)."""
        run = self.get_object()
        return HttpResponse(digests.canonical_bytes(run.manifest), content_type="application/json")
