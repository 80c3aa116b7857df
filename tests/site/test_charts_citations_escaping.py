"""Charts drawn from the runs, citations that carry permalink, digest and access date, and
escaped output everywhere a source-supplied string appears."""

import json
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from registry import charts, citations, selectors
from registry.models import BenchmarkRun
from tests.site.conftest import liger_rows

HOSTILE = '<script>alert("x")</script>'


@pytest.mark.django_db
class TestCharts:
    def test_one_panel_per_gpu_and_pass_one_line_per_implementation(self, import_rows):
        import_rows(liger_rows(gpus=2, xs=(1024, 2048, 4096, 8192)))
        panels, omitted = charts.panels_build(selectors.chart_points(BenchmarkRun.objects.all()))
        assert omitted == 0
        assert [(p.gpu, p.operation_mode) for p in panels] == [
            ("NVIDIA A100 SXM4 80GB", "forward"),
            ("NVIDIA A100 SXM4 80GB", "backward"),
            ("NVIDIA H100 80GB HBM3", "forward"),
            ("NVIDIA H100 80GB HBM3", "backward"),
        ]
        for panel in panels:
            assert [s.label for s in panel.series] == ["huggingface", "liger"]
            assert len({s.color for s in panel.series}) == 2

    def test_svg_has_a_band_a_line_and_a_point_per_run_linked_from_its_table(self, import_rows):
        import_rows(liger_rows(xs=(1024, 2048, 4096, 8192), modes=("backward",)))
        panel = charts.panels_build(selectors.chart_points(BenchmarkRun.objects.all()))[0][0]
        svg = str(panel.svg)
        assert svg.count('class="series-band"') == 2
        assert svg.count('class="series-line"') == 2
        # Each point a marker with its tooltip inside it, coloured by its series' group.
        markers = re.findall(r"<(?:circle|rect|path) ([^>]*)><title>([^<]*)</title>", svg)
        assert len(markers) == 8 and not any("fill=" in attributes for attributes, _ in markers)
        assert {tip.split(",")[0] for _, tip in markers} == {"huggingface", "liger"}
        for series in panel.series:
            assert f'data-series="{series.label}" fill="{series.color}"' in svg
        for run in BenchmarkRun.objects.all():
            assert f'href="{run.get_absolute_url()}"' in str(panel.table_body)
        # One keyboard stop: the region is focusable, nothing inside the picture is.
        assert svg.startswith('<div class="chart-region" tabindex="0"') and "<a " not in svg
        assert 'role="img"' in svg and 'aria-labelledby="' in svg
        assert "liger: 11.24 ms at 1024 to 82.92 ms at 8192" in panel.description

    def test_band_spans_p20_to_p80(self, import_rows):
        import_rows(liger_rows(providers=("liger",), xs=(1024, 4096), modes=("forward",)))
        panel = charts.panels_build(selectors.chart_points(BenchmarkRun.objects.all()))[0][0]
        svg = str(panel.svg)
        band = re.search(r'class="series-band" points="([^"]+)"', svg).group(1)
        line = re.search(r'class="series-line" points="([^"]+)"', svg).group(1)
        band_y = [float(pair.split(",")[1]) for pair in band.split()]
        line_y = [float(pair.split(",")[1]) for pair in line.split()]
        # SVG y grows downwards: the p80 edge is above the median, the p20 edge below it.
        assert band_y[0] < line_y[0] < band_y[-1]

    def test_panels_beyond_the_limit_are_counted_not_drawn(self, import_rows):
        import_rows(liger_rows(gpus=3, modes=("forward", "backward", "full")))
        panels, omitted = charts.panels_build(selectors.chart_points(BenchmarkRun.objects.all()), limit=4)
        assert (len(panels), omitted) == (4, 5)

    def test_figures_are_formatted_for_reading(self):
        assert charts.significant(144.2132110595703) == "144.2"
        assert charts.measure(141.28550720214844) == "141.29"
        assert charts.measure(0.0123456) == "0.01235"
        assert charts.significant(12260.4) == "12,260"


@pytest.mark.django_db
class TestCitations:
    def test_bibtex_download_has_permalink_digest_and_access_date(self, client, import_rows):
        import_rows(liger_rows())
        run = BenchmarkRun.objects.first()
        response = client.get(reverse("registry:run-cite-bibtex", args=[run.pk]))
        assert response.status_code == 200
        assert response["Content-Type"].startswith("application/x-bibtex")
        assert "attachment" in response["Content-Disposition"]
        text = response.content.decode()
        assert text.startswith("@misc{kernelindex-")
        assert f"url = {{{citations.permalink(run)}}}" in text
        assert run.digest in text
        assert f"urldate = {{{timezone.now().date().isoformat()}}}" in text
        assert text.count("{") == text.count("}")

    def test_csl_json_is_a_dataset_with_accessed_and_issued_dates(self, client, import_rows):
        import_rows(liger_rows())
        run = BenchmarkRun.objects.first()
        response = client.get(reverse("registry:run-cite-csl", args=[run.pk]))
        assert response.status_code == 200
        assert response["Content-Type"] == "application/vnd.citationstyles.csl+json"
        [item] = json.loads(response.content)
        today = timezone.now().date()
        assert item["type"] == "dataset"
        assert item["URL"] == citations.permalink(run)
        assert item["accessed"] == {"date-parts": [[today.year, today.month, today.day]]}
        assert item["issued"] == {"date-parts": [[2024, 9, 3]]}
        assert run.digest in item["note"]

    def test_bibtex_escapes_special_characters(self):
        assert citations._bibtex_escape("50% of a_b & {c}") == r"50\% of a\_b \& \{c\}"


@pytest.mark.django_db
class TestEscaping:
    @pytest.fixture
    def hostile_run(self, import_rows):
        rows = liger_rows(xs=(1024,), modes=("forward",))
        rows[0]["kernel_provider"] = HOSTILE
        import_rows(rows)
        return BenchmarkRun.objects.get(implementation__provider=HOSTILE)

    @pytest.mark.parametrize(
        "url",
        [
            lambda run: run.get_absolute_url(),
            lambda run: reverse("registry:kernel-detail", args=["geglu"]),
            lambda run: reverse("registry:compare", args=[run.pk, run.pk]),
            lambda run: reverse("registry:implementation-list"),
            lambda run: reverse("registry:run-list"),
            lambda run: reverse("registry:search") + "?q=script",
            lambda run: reverse("registry:home"),
        ],
    )
    def test_source_strings_are_escaped_on_every_page(self, client, hostile_run, url):
        response = client.get(url(hostile_run))
        assert response.status_code == 200
        body = response.content.decode()
        assert HOSTILE not in body
        assert "&lt;script&gt;" in body

    def test_a_hostile_search_query_is_escaped(self, client, import_rows):
        import_rows(liger_rows())
        response = client.get(reverse("registry:search"), {"q": HOSTILE})
        assert response.status_code == 200
        assert HOSTILE not in response.content.decode()
