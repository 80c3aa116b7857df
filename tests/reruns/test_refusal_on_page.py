"""A run whose workload the harness cannot run says why on its page, in the harness's own words."""

import pytest
from django.urls import reverse

from registry.models import BenchmarkRun
from registry.reruns.harness import UNMAPPED
from registry.sources.liger.services import BUNDLED_LIGER_CSV, liger_import

pytestmark = pytest.mark.django_db


@pytest.fixture
def bundled():
    liger_import(path=BUNDLED_LIGER_CSV)


def test_a_refused_kernels_run_page_gives_the_reason(client, bundled):
    run = BenchmarkRun.objects.filter(kernel__slug="fused_linear_simpo_loss").first()

    response = client.get(reverse("registry:run-detail", args=[run.pk]))

    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-notice="harness-refusal"' in page
    assert "setup_simpo_loss" in page and "setup_simpo_loss" in UNMAPPED["fused_linear_simpo_loss"]


def test_a_mapped_kernels_run_page_has_no_refusal(client, bundled):
    run = BenchmarkRun.objects.filter(kernel__slug="geglu", implementation__provider="liger").first()

    response = client.get(reverse("registry:run-detail", args=[run.pk]))

    assert response.status_code == 200
    assert b'data-notice="harness-refusal"' not in response.content
