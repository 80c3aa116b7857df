"""/kit/: the reproduction kit's sdist, built from the current harness on first request (the site's
side of the kit; not part of the package itself)."""

from django.http import FileResponse, Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_safe

from registry.reruns.kit.build import kit_build, kit_filename


@require_safe
def kit_latest(request):
    """The kit of the running site's harness: a redirect, so the link never goes stale."""
    return redirect("kit-file", filename=kit_filename())


@require_safe
def kit_file(request, filename):
    """Only the current kit is served: an older file name is a 404 naming the current one."""
    current = kit_filename()
    if filename != current:
        raise Http404(f"No kit {filename}; the current one is {current}.")
    response = FileResponse(kit_build().open("rb"), as_attachment=True, filename=current)
    response["Content-Type"] = "application/gzip"
    response["Cache-Control"] = "public, max-age=31536000, immutable"  # the name carries its content's hash
    return response
