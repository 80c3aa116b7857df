"""Reading attestations for pages and the API, with a constant number of queries."""

import functools
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.cache import cache
from django.db import connection
from django.db.models import F, Subquery, Value

from attestations.models import (
    Attestation,
    AttestationKind,
    AttestationState,
    IssueReport,
    IssueReportCategory,
    IssueReportState,
)
from registry.models import BenchmarkRun


@dataclass(frozen=True)
class ReproductionSummary:
    """One line of the run page's summary: reproductions on one GPU product, those that carry
    their data (a kit's result file) apart from typed ones, with the spread of their medians."""

    count: int
    gpu_product: str
    max_deviation_percent: float
    same_gpu: bool
    carries_data: bool = False
    low: float = 0.0
    high: float = 0.0
    unit: str = ""

    def __str__(self) -> str:
        noun = "reproduction" if self.count == 1 else "reproductions"
        if not self.carries_data:
            return (
                f"{self.count} typed {noun} on {self.gpu_product}, within ±{self.max_deviation_percent:.1f}%"
            )
        spread = f"median {self.low:.4g}" if self.count == 1 else f"medians {self.low:.4g}–{self.high:.4g}"
        return (
            f"{self.count} {noun} with data on {self.gpu_product}: {spread} {self.unit}, "
            f"within ±{self.max_deviation_percent:.1f}%"
        )


def run_approved_attestations(run: BenchmarkRun) -> list[Attestation]:
    """The run's public attestations, oldest first, in one query."""
    attestations = list(
        Attestation.objects.approved().filter(run=run).select_related("author").order_by("created_at", "pk")
    )
    for attestation in attestations:
        attestation.run = run  # saves one query per row when computing deviations
    return attestations


def reproduction_summary(run: BenchmarkRun, attestations: list[Attestation]) -> list[ReproductionSummary]:
    """Reproductions grouped by GPU product (case and spacing ignored) and by whether they carry
    their data, the run's own GPU first and data-bearing ones first, each with the largest
    distance of a median from the run's recorded median and the range of the medians."""
    groups: dict[tuple[str, bool], list[Attestation]] = {}
    for attestation in attestations:
        if attestation.is_reproduction and attestation.median is not None:
            key = (_gpu_key(attestation.gpu_product), attestation.carries_data)
            groups.setdefault(key, []).append(attestation)
    run_gpu = _gpu_key(run.environment.product)
    lines = [
        ReproductionSummary(
            count=len(members),
            gpu_product=members[0].gpu_product,
            max_deviation_percent=max(abs(a.deviation_percent) for a in members),
            same_gpu=gpu == run_gpu,
            carries_data=carries_data,
            low=min(a.median for a in members),
            high=max(a.median for a in members),
            unit=members[0].unit,
        )
        for (gpu, carries_data), members in groups.items()
    ]
    return sorted(
        lines, key=lambda line: (not line.same_gpu, not line.carries_data, -line.count, line.gpu_product)
    )


def _gpu_key(product: str) -> str:
    """ "NVIDIA A100-SXM4-80GB", "a100 sxm4 80gb" and "NVIDIA A100 SXM4 80GB" are one GPU."""
    words = product.lower().replace("-", " ").split()
    if words[:1] == ["nvidia"]:
        words = words[1:]
    return " ".join(words)


def user_submissions(user) -> tuple[list[Attestation], list[IssueReport]]:
    """Everything one user filed, in any state: two queries."""
    run_related = ["run__kernel", "run__implementation", "run__environment"]
    attestations = list(
        Attestation.objects.filter(author=user).select_related(*run_related).order_by("-created_at", "-pk")
    )
    reports = list(
        IssueReport.objects.filter(reporter=user).select_related(*run_related).order_by("-created_at", "-pk")
    )
    return attestations, reports


@dataclass(frozen=True)
class OwnSubmission:
    """One of the visitor's own attestations or issue reports, as their run page lists it."""

    anchor: str
    title: str
    state: str
    state_label: str
    created_at: datetime
    url: str


def run_personal(user, run_pk: int, cached: dict | None = None) -> dict:
    """What one visitor has of their own on a run page: their reproductions and notes not yet
    approved (approved ones are in the public section) and their issue reports, in one query, or
    none for a user known to have filed nothing (`FILINGS_KEY`); for a moderator, the run's queues.
    Not staff (every contributor): no permission query, since moderators reach their queues through
    the admin, which needs staff status. `cached`: the values of `personal_cache_keys` already read
    for this request (registry.cache reads them with the page)."""
    if user is None or not user.is_authenticated:
        return {}
    return {
        "submissions": _own_submissions(user, run_pk, cached),
        "moderation": _run_moderation(user, run_pk),
    }


def run_personal_shown(request, arg) -> dict:
    """The run page's personal region (registry.cache.PERSONAL_REGIONS): the visitor's own
    submissions on the run and a moderator's queues, as plain values."""
    personal = run_personal(request.user, int(arg), getattr(request, "personal_cache", None))
    return {
        "run_pk": arg,
        "submissions": personal.get("submissions"),
        "moderation": personal.get("moderation"),
    }


# Most signed-in visitors have filed nothing, and their run pages need not ask the database for
# their submissions. The cache says so per user: FILED_NOTHING, stored by the query below when it
# finds nothing of theirs on any run, skips the query; FILED, stored by every service that creates
# a user's attestation or issue report (`filings_changed`) before its transaction commits,
# replaces it, and keeps a query that read the database before that commit from storing
# FILED_NOTHING after it (`cache.add` stores nothing over FILED). A marker lost from the cache only
# costs the query again; a filing created outside those services (a shell, a fixture) calls
# `filings_changed` itself. The timeout bounds how long a missed call could hide one.
FILINGS_KEY = "kernelindex:filings:{user_pk}"
FILED_NOTHING, FILED = "nothing", "filed"
FILINGS_MARKER_SECONDS = 86400


def filings_changed(*, user_pk: int) -> None:
    """Call when a user files something, before the transaction that creates it commits."""
    cache.set(FILINGS_KEY.format(user_pk=user_pk), FILED, FILINGS_MARKER_SECONDS)


def _filed_nothing_remember(user_pk: int) -> None:
    cache.add(FILINGS_KEY.format(user_pk=user_pk), FILED_NOTHING, FILINGS_MARKER_SECONDS)


def personal_cache_keys(request) -> list[str]:
    """The cache keys the run region reads for this visitor (registry.cache.PERSONAL_CACHE_KEYS)."""
    user = request.user
    return [FILINGS_KEY.format(user_pk=user.pk)] if user.is_authenticated else []


def _own_submissions(user, run_pk: int, cached: dict | None = None) -> list[OwnSubmission]:
    key = FILINGS_KEY.format(user_pk=user.pk)
    marker = cached.get(key) if cached is not None else cache.get(key)
    if marker == FILED_NOTHING:
        return []
    rows = list(_own_rows(user, run_pk).order_by("-created_at", "-pk"))
    if not rows:
        _filed_nothing_remember(user.pk)
    return [_own_submission(*row) for row in rows if row[0] != "anywhere"]


def _own_rows(user, run_pk: int):
    """The user's submissions on the run, and at most one attestation and one issue report of
    theirs from any run ("anywhere", in any state): no row at all means they filed nothing."""
    columns = ("what", "pk", "label", "state", "created_at")
    attestations = (
        Attestation.objects.filter(run_id=run_pk, author=user)
        .exclude(state=AttestationState.APPROVED)
        .annotate(what=Value("attestation"), label=F("kind"))
        .values_list(*columns)
        .order_by()
    )
    reports = (
        IssueReport.objects.filter(run_id=run_pk, reporter=user)
        .annotate(what=Value("report"), label=F("category"))
        .values_list(*columns)
        .order_by()
    )
    any_attestation = Attestation.objects.filter(author=user).order_by().values("pk")[:1]
    any_report = IssueReport.objects.filter(reporter=user).order_by().values("pk")[:1]
    anywhere = [
        Attestation.objects.filter(pk=Subquery(any_attestation))
        .annotate(what=Value("anywhere"), label=F("kind"))
        .values_list(*columns)
        .order_by(),
        IssueReport.objects.filter(pk=Subquery(any_report))
        .annotate(what=Value("anywhere"), label=F("category"))
        .values_list(*columns)
        .order_by(),
    ]
    return attestations.union(reports, *anywhere, all=True)


def _own_submission(what, pk, label, state, created_at) -> OwnSubmission:
    if what == "attestation":
        title = f"{AttestationKind(label).label} #{pk}"
        return OwnSubmission(
            f"own-attestation-{pk}",
            title,
            state,
            AttestationState(state).label,
            created_at,
            Attestation(pk=pk).get_absolute_url(),
        )
    title = f"Issue report #{pk} ({IssueReportCategory(label).label.lower()})"
    return OwnSubmission(
        f"own-report-{pk}",
        title,
        state,
        IssueReportState(state).label,
        created_at,
        IssueReport(pk=pk).get_absolute_url(),
    )


# The permissions a run page's moderation region reads, as (app label, codename).
MODERATION_PERMISSIONS = {
    "moderates": ("attestations", "moderate_attestation"),
    "triages": ("attestations", "triage_issuereport"),
    "can_rerun": ("reruns", "request_rerun"),
}


def _run_moderation(user, run_pk: int) -> dict | None:
    """A staff visitor's moderation region: what they may do on this run and its queues' counts,
    read in one query (the three permissions, given to the user or a group of theirs, as Django's
    ModelBackend grants them, and the two counts), where `has_perm` and two counts took four."""
    if not user.is_staff or not user.is_active:
        return None
    row = _moderation_row(user, run_pk)
    if user.is_superuser:
        row.update(dict.fromkeys(MODERATION_PERMISSIONS, True))
    if not (row["moderates"] or row["triages"] or row["can_rerun"]):
        return None
    return {
        "pending": row["pending"] if row["moderates"] else None,
        "open_reports": row["open_reports"] if row["triages"] else None,
        "can_rerun": row["can_rerun"],
    }


def _moderation_row(user, run_pk: int) -> dict:
    """One raw query: building the same from ORM subqueries cost about 10 ms of Python a page."""
    sql = _moderation_sql(connection.vendor)
    params = []
    for app_label, codename in MODERATION_PERMISSIONS.values():
        params += [app_label, codename, user.pk, user.pk]
    params += [run_pk, AttestationState.PENDING, run_pk, IssueReportState.OPEN, IssueReportState.ACKNOWLEDGED]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        values = cursor.fetchone()
    row = dict(zip(MODERATION_PERMISSIONS, map(bool, values[:3]), strict=True))
    return {**row, "pending": values[3], "open_reports": values[4]}


@functools.cache
def _moderation_sql(vendor: str) -> str:
    """The moderation row's SQL, with its table names, written once per process (and vendor)."""
    permitted = (
        "p.id IN (SELECT permission_id FROM {user_perms} WHERE {user_col} = %s)"
        " OR p.id IN (SELECT gp.permission_id FROM {group_perms} gp JOIN {user_groups} ug"
        " ON ug.group_id = gp.{group_col} WHERE ug.{user_col} = %s)"
    )
    granted = (
        "EXISTS (SELECT 1 FROM {permission} p JOIN {content_type} ct ON ct.id = p.content_type_id"
        f" WHERE ct.app_label = %s AND p.codename = %s AND ({permitted}))"
    )
    sql = "SELECT " + ", ".join(
        [granted] * len(MODERATION_PERMISSIONS)
        + [
            "(SELECT COUNT(*) FROM {attestation} WHERE run_id = %s AND state = %s)",
            "(SELECT COUNT(*) FROM {report} WHERE run_id = %s AND state IN (%s, %s))",
        ]
    )
    return sql.format(**_moderation_tables())


def _moderation_tables() -> dict:
    user_model = get_user_model()
    user_perms = user_model.user_permissions.through._meta
    user_groups = user_model.groups.through._meta
    group_perms = Group.permissions.through._meta
    quote = connection.ops.quote_name
    return {
        "permission": quote(Permission._meta.db_table),
        "content_type": quote(ContentType._meta.db_table),
        "user_perms": quote(user_perms.db_table),
        "user_groups": quote(user_groups.db_table),
        "group_perms": quote(group_perms.db_table),
        "user_col": quote(user_perms.get_field(user_model._meta.model_name).column),
        "group_col": quote(group_perms.get_field("group").column),
        "attestation": quote(Attestation._meta.db_table),
        "report": quote(IssueReport._meta.db_table),
    }
