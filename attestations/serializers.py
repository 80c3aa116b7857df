"""Input serializers check types; the services check content. Output serializers say what each
audience sees: the public never sees a rejection reason or anything not approved."""

from rest_framework import serializers

from attestations.models import (
    LINK_MAX,
    LINKS_MAX,
    TEXT_MAX,
    VERSION_MAX,
    Attestation,
    AttestationKind,
    IssueReport,
    IssueReportCategory,
)
from registry.models import BenchmarkRun, Verdict


class AttestationInputSerializer(serializers.Serializer):
    run = serializers.PrimaryKeyRelatedField(queryset=BenchmarkRun.objects.public())
    kind = serializers.ChoiceField(choices=AttestationKind.choices)
    median = serializers.FloatField(required=False, allow_null=True)
    p20 = serializers.FloatField(required=False, allow_null=True)
    p80 = serializers.FloatField(required=False, allow_null=True)
    unit = serializers.CharField(max_length=10, required=False, allow_blank=True)
    gpu_product = serializers.CharField(max_length=100, required=False, allow_blank=True)
    driver_version = serializers.CharField(max_length=VERSION_MAX, required=False, allow_blank=True)
    cuda_version = serializers.CharField(max_length=VERSION_MAX, required=False, allow_blank=True)
    torch_version = serializers.CharField(max_length=VERSION_MAX, required=False, allow_blank=True)
    triton_version = serializers.CharField(max_length=VERSION_MAX, required=False, allow_blank=True)
    liger_version = serializers.CharField(max_length=VERSION_MAX, required=False, allow_blank=True)
    harness = serializers.CharField(max_length=300, required=False, allow_blank=True)
    links = serializers.ListField(
        child=serializers.CharField(max_length=LINK_MAX), max_length=LINKS_MAX, required=False
    )
    text = serializers.CharField(max_length=TEXT_MAX, required=False, allow_blank=True)


class AttestationSerializer(serializers.ModelSerializer):
    """The public view of an approved attestation."""

    author = serializers.CharField(source="author.get_username", read_only=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    # Declared: a read-only model field loses allow_blank, and a typed reproduction has no verdict.
    verdict = serializers.ChoiceField(
        choices=Verdict.choices,
        allow_blank=True,
        read_only=True,
        help_text="The contributor's file judged against the run; blank for a typed reproduction or a note.",
    )

    class Meta:
        model = Attestation
        fields = [
            "id",
            "run",
            "kind",
            "author",
            "median",
            "p20",
            "p80",
            "unit",
            "gpu_product",
            "driver_version",
            "cuda_version",
            "torch_version",
            "triton_version",
            "liger_version",
            "harness",
            "links",
            "text",
            "origin",
            "ci_low",
            "ci_high",
            "verdict",
            "deviation",
            "deviation_low",
            "deviation_high",
            "verdict_note",
            "created_at",
            "url",
        ]
        read_only_fields = fields


class OwnAttestationSerializer(AttestationSerializer):
    """What the author sees of their own: the state and the moderators' reason too."""

    class Meta(AttestationSerializer.Meta):
        fields = [*AttestationSerializer.Meta.fields, "state", "rejection_reason", "decided_at", "checks"]
        read_only_fields = fields


class IssueReportInputSerializer(serializers.Serializer):
    run = serializers.PrimaryKeyRelatedField(queryset=BenchmarkRun.objects.public())
    category = serializers.ChoiceField(choices=IssueReportCategory.choices)
    description = serializers.CharField(max_length=TEXT_MAX)


class IssueReportSerializer(serializers.ModelSerializer):
    url = serializers.CharField(source="get_absolute_url", read_only=True)

    class Meta:
        model = IssueReport
        fields = [
            "id",
            "run",
            "category",
            "description",
            "state",
            "resolution",
            "created_at",
            "updated_at",
            "url",
        ]
        read_only_fields = fields
