"""Pages for controlled jobs: a list and one page per job, which refreshes while it is live; the
fleet of physical cards that ran them, and one page per card."""

from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from registry.reruns import fleet
from registry.reruns.models import JobState, RerunJob

REFRESH_SECONDS = 5


@require_safe
def job_list(request):
    jobs = RerunJob.objects.public()
    state = request.GET.get("state", "")
    if state in JobState.values:
        jobs = jobs.filter(state=state)
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    return render(
        request, "registry/job_list.html", {"page": page, "state": state, "states": JobState.choices}
    )


@require_safe
def job_detail(request, pk):
    job = get_object_or_404(RerunJob.objects.public(), pk=pk)
    response = render(request, "registry/job_detail.html", {"job": job, "refresh_seconds": REFRESH_SECONDS})
    if job.is_active:
        # The browser reloads the page until the job finishes: live state without JavaScript.
        response["Refresh"] = str(REFRESH_SECONDS)
    return response


@require_safe
def fleet_list(request):
    """KernelIndex's physical cards and each one's offset from the fleet per class."""
    return render(request, "registry/fleet.html", {"cards": list(fleet.fleet().values())})


@require_safe
def fleet_card(request, prefix):
    card = fleet.fleet(with_jobs=True).get(prefix)
    if card is None:
        raise Http404("KernelIndex has no card with this UUID prefix.")
    return render(request, "registry/fleet_card.html", {"card": card})
