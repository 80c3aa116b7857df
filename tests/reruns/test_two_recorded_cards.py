"""`reproduced` on a GPU means two recorded cards agreed. The 8 of the 32 older H200 GeGLU runs
(2026-11-29, measuring card not recorded) that agreeing reruns made `reproduced` load at
`measured`, and the one service that settles a level (run_level_settle) lowers such a run in a
loaded registry with an audit entry."""

import pytest
from django.contrib.contenttypes.models import ContentType

from attestations.models import AuditEntry
from registry.models import BenchmarkRun, EvidenceLevel, Verdict
from registry.reruns.controlled import BUNDLED_CONTROLLED_DIR, controlled_runs_load
from registry.reruns.models import JobKind, RerunJob, raises_level
from registry.reruns.services import run_level_settle
from registry.reruns.services.record import LEVEL_AUDIT_ACTION

pytestmark = pytest.mark.django_db


def geglu_runs_without_a_card():
    return BenchmarkRun.objects.filter(
        kernel__slug="geglu", measured_by_jobs__kind=JobKind.MEASURE, measured_by_jobs__gpu_uuid=""
    )


class TestRule:
    @pytest.mark.parametrize(
        ("sampling", "on_gpu", "raises"),
        [
            ({"basis": "samples", "same_gpu": False}, True, True),
            ({"basis": "samples", "same_gpu": True}, True, False),
            ({"basis": "samples", "same_gpu": None}, True, False),  # the measuring card unknown
            ({"basis": "samples", "same_gpu": None}, False, True),  # a CPU has no card
            ({"basis": "upstream", "same_gpu": None}, True, True),  # a source's run, its own machine
        ],
    )
    def test_an_agreeing_rerun_raises_the_level_only_across_two_known_cards(self, sampling, on_gpu, raises):
        assert raises_level(Verdict.AGREES, sampling, on_gpu=on_gpu) is raises
        assert raises_level(Verdict.INCONCLUSIVE, sampling, on_gpu=on_gpu) is False


class TestShippedGeglu:
    def test_the_older_runs_without_a_card_load_at_measured(self):
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz")

        runs = geglu_runs_without_a_card()
        assert runs.count() == 32
        assert set(runs.values_list("evidence_level", flat=True)) == {EvidenceLevel.MEASURED}
        # 8 of them hold a rerun that agrees: the verdict stays, the level does not follow it.
        agreed = runs.filter(rerun_jobs__verdict=Verdict.AGREES).distinct()
        assert agreed.count() == 8

    def test_a_loaded_run_is_lowered_once_with_an_audit_entry(self):
        controlled_runs_load(path=BUNDLED_CONTROLLED_DIR / "nvidia-h200-geglu.json.gz")
        run = geglu_runs_without_a_card().filter(rerun_jobs__verdict=Verdict.AGREES).first()
        # As a registry loaded under the old rule holds it.
        BenchmarkRun.objects.filter(pk=run.pk).update(evidence_level=EvidenceLevel.REPRODUCED)
        run.refresh_from_db()

        assert run_level_settle(run=run, reason="the rule changed") is True
        assert run_level_settle(run=run, reason="the rule changed") is False

        run.refresh_from_db()
        assert run.evidence_level == EvidenceLevel.MEASURED
        entry = AuditEntry.objects.get(
            content_type=ContentType.objects.get_for_model(BenchmarkRun), object_id=run.pk
        )
        assert (entry.action, entry.from_state, entry.to_state, entry.actor) == (
            LEVEL_AUDIT_ACTION,
            "reproduced",
            "measured",
            None,
        )
        assert RerunJob.objects.filter(run=run, verdict=Verdict.AGREES).exists()
