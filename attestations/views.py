"""Contributor pages: file a reproduction, note or issue report; follow one's own submissions.

Each view fetches, validates with a form, calls one service and renders or redirects.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST, require_safe
from rest_framework.authtoken.models import Token

from attestations import ratelimit, selectors, services
from attestations.forms import AttestationForm, IssueReportForm
from attestations.models import Attestation, AttestationKind, IssueReport
from registry.models import BenchmarkRun


def _run(pk):
    return get_object_or_404(BenchmarkRun.objects.public(), pk=pk)


def _submit(request, form, call):
    """Rate limit, call the service, map its ValidationError onto the form. Returns the new
    object, or None with the form carrying the errors (and the `Limited` that refused it)."""
    limited = ratelimit.submission_consume(request)
    if limited:
        form.add_error(None, limited.message)
        return None, limited
    try:
        return call(), None
    except ValidationError as exc:
        form.add_error(None, exc)
        return None, None


def _form_page(request, template, context, limited):
    """The form again; a 429 with Retry-After when the rate limit refused it."""
    if limited is None:
        return render(request, template, context)
    response = render(request, template, context, status=429)
    response["Retry-After"] = str(limited.retry_after)
    return response


@login_required
def attestation_create(request, pk):
    run = _run(pk)
    form = AttestationForm(request.POST or None, request.FILES or None, run=run)
    limited = None
    if request.method == "POST" and form.is_valid():
        content = form.result_file()
        attestation, limited = _submit(
            request,
            form,
            lambda: services.reproduction_file_submit(
                run=run, author=request.user, content=content, text=form.cleaned_data["text"]
            )
            if content is not None
            else services.attestation_submit(run=run, author=request.user, **form.submission()),
        )
        if attestation:
            messages.success(
                request,
                f"Thank you. Your {attestation.get_kind_display().lower()} waits for a "
                "moderator; it appears on the run page once approved.",
            )
            return redirect("attestations:my-submissions")
    context = {
        "form": form,
        "run": run,
        "run_url": request.build_absolute_uri(run.get_absolute_url()),
        # `?kind=note` (the run page's "Add a note"): the form asks for the note only.
        "only_note": (request.POST or request.GET).get("kind") == AttestationKind.NOTE,
    }
    return _form_page(request, "attestations/attestation_form.html", context, limited)


@login_required
def issue_report_create(request, pk):
    run = _run(pk)
    form = IssueReportForm(request.POST or None)
    limited = None
    if request.method == "POST" and form.is_valid():
        report, limited = _submit(
            request,
            form,
            lambda: services.issue_report_create(run=run, reporter=request.user, **form.cleaned_data),
        )
        if report:
            messages.success(request, "Thank you. The moderators will look at your report.")
            return redirect("attestations:my-submissions")
    return _form_page(request, "attestations/report_form.html", {"form": form, "run": run}, limited)


@require_safe
def run_attestations(request, pk):
    """All approved replications and notes of one run (the run page shows the same section)."""
    return render(request, "attestations/run_attestations.html", {"run": _run(pk)})


@require_safe
@never_cache
def attestation_detail(request, pk):
    """Approved ones are public; pending and rejected ones only for their author and moderators."""
    attestation = get_object_or_404(
        Attestation.objects.visible_to(request.user).select_related(
            "author", "run__kernel", "run__implementation", "run__environment"
        ),
        pk=pk,
    )
    return render(request, "attestations/attestation_detail.html", {"attestation": attestation})


@require_safe
@never_cache
@login_required
def issue_report_detail(request, pk):
    report = get_object_or_404(
        IssueReport.objects.visible_to(request.user).select_related(
            "reporter", "run__kernel", "run__implementation", "run__environment"
        ),
        pk=pk,
    )
    return render(request, "attestations/report_detail.html", {"report": report})


@require_safe
@never_cache
@login_required
def my_submissions(request):
    attestations, reports = selectors.user_submissions(request.user)
    return render(
        request,
        "attestations/my_submissions.html",
        {"attestations": attestations, "reports": reports},
    )


@require_safe
@never_cache
@login_required
def account(request):
    token = Token.objects.filter(user=request.user).first()
    return render(request, "attestations/account.html", {"token": token})


@login_required
@require_POST
def api_token_regenerate(request):
    replaced = Token.objects.filter(user=request.user).exists()
    services.api_token_regenerate(user=request.user)
    messages.success(
        request,
        "A new API token was created; the old one no longer works."
        if replaced
        else "Your API token was created; it is shown below.",
    )
    return redirect("attestations:account")
