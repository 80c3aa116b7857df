"""Forms check types and sizes; the rules about content live in the services, which raise
ValidationErrors keyed by these same field names."""

from django import forms
from django.conf import settings

from attestations.models import (
    LINK_MAX,
    LINKS_MAX,
    REASON_MAX,
    TEXT_MAX,
    VERSION_MAX,
    AttestationKind,
    IssueReportCategory,
)


class AttestationForm(forms.Form):
    kind = forms.ChoiceField(choices=AttestationKind.choices, widget=forms.RadioSelect)
    file = forms.FileField(
        label="Result file from the kit",
        required=False,
        help_text="The JSON file kernelindex-repro wrote: its figures are computed here from its samples, "
        "and the typed figures below are then left aside.",
    )
    median = forms.FloatField(required=False, help_text="In the run's unit.")
    p20 = forms.FloatField(label="p20", required=False)
    p80 = forms.FloatField(label="p80", required=False)
    unit = forms.CharField(max_length=10, required=False)
    gpu_product = forms.CharField(label="GPU product", max_length=100, required=False)
    driver_version = forms.CharField(max_length=VERSION_MAX, required=False)
    cuda_version = forms.CharField(label="CUDA version", max_length=VERSION_MAX, required=False)
    torch_version = forms.CharField(max_length=VERSION_MAX, required=False)
    triton_version = forms.CharField(max_length=VERSION_MAX, required=False)
    liger_version = forms.CharField(label="liger-kernel version", max_length=VERSION_MAX, required=False)
    harness = forms.CharField(
        label="Harness command or version",
        max_length=300,
        required=False,
        help_text="e.g. python benchmark/scripts/benchmark_geglu.py, liger-kernel 0.8.5",
    )
    links = forms.CharField(
        label="Artifact links",
        required=False,
        max_length=LINKS_MAX * (LINK_MAX + 2),
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=f"Up to {LINKS_MAX} http(s) links, one a line.",
    )
    text = forms.CharField(
        label="Text", required=False, max_length=TEXT_MAX, widget=forms.Textarea(attrs={"rows": 6})
    )

    def __init__(self, *args, run, **kwargs):
        kwargs.setdefault(
            "initial",
            {"kind": AttestationKind.REPRODUCTION, "unit": run.unit, "gpu_product": run.environment.product},
        )
        super().__init__(*args, **kwargs)
        self.fields["median"].help_text = f"In {run.unit}, as the run records it ({run.median:g} {run.unit})."

    def submission(self) -> dict:
        """The service's keyword arguments. The page shows the reproduction fields prefilled
        for either kind, so for a note only its text is sent on."""
        data = dict(self.cleaned_data)
        data.pop("file")
        if data["kind"] == AttestationKind.NOTE:
            return {"kind": data["kind"], "text": data["text"]}
        return data

    def result_file(self) -> bytes | None:
        """The uploaded result file's bytes (one more than the limit at most: the service says it
        is too large), or None when the figures were typed."""
        upload = self.cleaned_data.get("file")
        if not upload or self.cleaned_data["kind"] != AttestationKind.REPRODUCTION:
            return None
        return upload.read(settings.REPRODUCTION_FILE_MAX_BYTES + 1)

    def clean_links(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["links"].splitlines() if line.strip()]


class IssueReportForm(forms.Form):
    category = forms.ChoiceField(choices=IssueReportCategory.choices)
    description = forms.CharField(max_length=TEXT_MAX, widget=forms.Textarea(attrs={"rows": 8}))


class ReasonForm(forms.Form):
    """The admin's reason (for a rejection) or resolution (for a report)."""

    reason = forms.CharField(max_length=REASON_MAX, widget=forms.Textarea(attrs={"rows": 4, "cols": 80}))
