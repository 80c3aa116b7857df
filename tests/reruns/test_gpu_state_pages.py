"""The GPU's state on the run page and in the API: a job sampled through its timing shows each
block's ranges (least–most) of SM clock, power and temperature and the share of readings with each
clock-event reason; an older job's identical before/after pair is shown as the stale reading it is,
and a power cap read only before the setup (the previous job's) is not this job's throttling."""

import pytest

from tests.reruns.conftest import h200_measured, harness_result

pytestmark = pytest.mark.django_db


def block(sm_low, sm_high, capped_share):
    return {
        "readings": 24,
        "seconds": 1.2,
        "hz": 20.0,
        "sm_clock_mhz": {"min": sm_low, "median": sm_high, "max": sm_high},
        "memory_clock_mhz": {"min": 3201, "median": 3201, "max": 3201},
        "power_w": {"min": 301.5, "median": 540.0, "max": 699.8},
        "temperature_c": {"min": 41, "median": 44, "max": 47},
        "reasons": {"sw_power_cap": capped_share} if capped_share else {},
    }


SAMPLED = {
    "uuid": "GPU-5e1f0c2a-0000-4000-8000-000000000001",
    "sampled_hz": 20.0,
    "blocks": [block(1980, 1980, 0), block(1755, 1980, 0.25), block(1755, 1755, 1.0)],
    "throttled": ["sw_power_cap"],
}
READING = {"sm_clock_mhz": 1755, "memory_clock_mhz": 3201, "temperature_c": 41, "power_w": 690.0}
STALE = {
    "before": {**READING, "reasons": ["sw_power_cap"]},
    "after": {**READING, "reasons": ["sw_power_cap"]},
    "throttled": ["sw_power_cap"],
}
LEFT_BEFORE = {  # the cap the previous job left, gone by the end of this one
    "before": {**READING, "reasons": ["sw_power_cap"]},
    "after": {**READING, "sm_clock_mhz": 1980, "power_w": 320.0, "reasons": []},
    "throttled": ["sw_power_cap"],
}


def measured_with(h200_run, gpu_state):
    return h200_measured(h200_run, harness_result(1.0, gpu_state=gpu_state))


def test_the_run_page_shows_each_blocks_sampled_ranges(client, h200_run):
    job = measured_with(h200_run, SAMPLED)

    response = client.get(job.result_run.get_absolute_url())

    assert response.status_code == 200
    page = response.content.decode()
    assert "while each block was timed" in page
    assert page.count("while timed: 24 readings at 20 Hz") == 3
    assert '<span data-range="SM clock">1755–1980 MHz</span>' in page
    assert '<span data-range="power">301.5–699.8 W</span>' in page
    assert "sw_power_cap (25% of readings)" in page
    assert 'data-notice="throttled"' in page
    assert "before the setup" not in page


def test_the_api_gives_the_sampled_ranges_per_block(client, h200_run):
    job = measured_with(h200_run, SAMPLED)

    response = client.get(f"/api/v1/jobs/{job.pk}/")

    assert response.status_code == 200
    state = response.json()["gpu_state"]
    assert [b["sm_clock_mhz"]["min"] for b in state["blocks"]] == [1980, 1755, 1755]
    assert state["blocks"][1]["reasons"] == {"sw_power_cap": 0.25}
    assert "before" not in state


def test_an_identical_older_pair_is_shown_as_a_stale_reading_not_a_throttle(client, h200_run):
    job = measured_with(h200_run, STALE)

    page = client.get(job.result_run.get_absolute_url()).content.decode()

    assert "identical: a reading NVML had not refreshed, not the state while timed" in page
    assert 'data-notice="throttled"' not in page


def test_a_cap_read_only_before_the_setup_is_not_this_jobs_throttling(client, h200_run):
    job = measured_with(h200_run, LEFT_BEFORE)

    page = client.get(job.result_run.get_absolute_url()).content.decode()

    assert "before the setup, not while timed" in page and "after the pass, not while timed" in page
    assert 'data-notice="throttled"' not in page
