"""Prometheus metrics at /metrics.

Request counts and latency by view come from django-prometheus's middleware. The figures kept in
the database (runs, imports and syncs, rerun jobs by state and GPU queue, job durations,
moderation queues) are read at scrape time by `DatabaseCollector`, so every web process reports
the same numbers whatever it served.

Access: a bearer token (METRICS_TOKEN); without one, only a direct loopback request (not one
forwarded by the reverse proxy) is answered.
"""

import hmac
import os
from datetime import timedelta

import prometheus_client
from django.apps import apps
from django.conf import settings
from django.db.models import Count
from django.http import HttpResponse, HttpResponseForbidden
from django.utils import timezone
from django.views.decorators.cache import never_cache
from prometheus_client import multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

JOB_DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600)
JOB_DURATION_WINDOW = timedelta(days=1)
# (queue name, model, filter): a moderation queue's length.
MODERATION_QUEUES = (
    ("attestations", "attestations.Attestation", {"state": "pending"}),
    ("issue_reports", "attestations.IssueReport", {"state__in": ["open", "acknowledged"]}),
)
LOOPBACK = {"127.0.0.1", "::1"}


@never_cache
def metrics(request):
    if not _allowed(request):
        return HttpResponseForbidden("metrics need a bearer token\n", content_type="text/plain")
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # every gunicorn worker's request figures
    else:
        registry.register(prometheus_client.REGISTRY)
    registry.register(DatabaseCollector())
    return HttpResponse(
        prometheus_client.generate_latest(registry), content_type=prometheus_client.CONTENT_TYPE_LATEST
    )


def _allowed(request) -> bool:
    token = settings.METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), token.encode())
    forwarded = any(h in request.META for h in ("HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP"))
    return request.META.get("REMOTE_ADDR") in LOOPBACK and not forwarded


class DatabaseCollector:
    def collect(self):
        yield self._runs()
        yield from self._imports()
        yield self._syncs()
        yield from self._jobs()
        yield from self._moderation_queues()

    def _runs(self):
        family = GaugeMetricFamily(
            "kernelindex_runs",
            "Benchmark runs by source and evidence level.",
            labels=["source", "evidence_level"],
        )
        BenchmarkRun = apps.get_model("registry", "BenchmarkRun")
        rows = (
            BenchmarkRun.objects.current()
            .values_list("source__slug", "evidence_level")
            .annotate(n=Count("pk"))
        )
        for source, level, n in rows.order_by():
            family.add_metric([source, level], n)
        return family

    def _imports(self):
        SourceImport = apps.get_model("registry", "SourceImport")
        total = CounterMetricFamily(
            "kernelindex_source_imports", "Files imported into a source.", labels=["source"]
        )
        for source, n in SourceImport.objects.values_list("source__slug").annotate(n=Count("pk")).order_by():
            total.add_metric([source], n)
        yield total
        last = GaugeMetricFamily(
            "kernelindex_last_import_rows",
            "Outcome of the last import of each file, by outcome.",
            labels=["source", "filename", "release", "outcome"],
        )
        latest = {}
        for record in SourceImport.objects.select_related("source").order_by("imported_at", "pk"):
            latest[(record.source.slug, record.filename)] = record
        for (source, filename), record in sorted(latest.items()):
            for outcome in ("created", "unchanged", "superseded", "withdrawn", "restored"):
                last.add_metric([source, filename, record.release, outcome], getattr(record, outcome))
        yield last
        when = GaugeMetricFamily(
            "kernelindex_last_import_timestamp_seconds", "When a source was last imported.", labels=["source"]
        )
        for (source, _), record in latest.items():
            when.add_metric([source], record.imported_at.timestamp())
        yield when

    def _syncs(self):
        family = CounterMetricFamily(
            "kernelindex_syncs", "Upstream sync attempts by outcome.", labels=["source", "status"]
        )
        SourceSync = apps.get_model("registry", "SourceSync")
        for source, status, n in (
            SourceSync.objects.values_list("source_slug", "status").annotate(n=Count("pk")).order_by()
        ):
            family.add_metric([source, status], n)
        return family

    def _jobs(self):
        RerunJob = apps.get_model("reruns", "RerunJob")
        jobs = GaugeMetricFamily(
            "kernelindex_jobs", "Rerun and measure jobs by state and GPU queue.", labels=["state", "queue"]
        )
        for state, gpu, n in (
            RerunJob.objects.values_list("state", "gpu_slug").annotate(n=Count("pk")).order_by()
        ):
            jobs.add_metric([state, f"gpu.{gpu}"], n)
        yield jobs
        yield self._job_durations(RerunJob)

    def _job_durations(self, RerunJob):
        family = HistogramMetricFamily(
            "kernelindex_job_duration_seconds",
            "Wall time of jobs finished in the last day, by GPU queue.",
            labels=["queue"],
        )
        since = timezone.now() - JOB_DURATION_WINDOW
        finished = RerunJob.objects.filter(finished_at__gte=since, started_at__isnull=False)
        by_queue: dict[str, list[float]] = {}
        for gpu, started, ended in finished.values_list("gpu_slug", "started_at", "finished_at"):
            by_queue.setdefault(f"gpu.{gpu}", []).append(max((ended - started).total_seconds(), 0))
        for queue, durations in sorted(by_queue.items()):
            buckets = [(floatToGoString(b), sum(d <= b for d in durations)) for b in JOB_DURATION_BUCKETS]
            buckets.append(("+Inf", len(durations)))
            family.add_metric([queue], buckets, sum_value=sum(durations))
        return family

    def _moderation_queues(self):
        family = GaugeMetricFamily(
            "kernelindex_moderation_queue", "Submissions waiting for a moderator.", labels=["queue"]
        )
        for queue, label, filters in MODERATION_QUEUES:
            family.add_metric([queue], apps.get_model(label).objects.filter(**filters).count())
        yield family
