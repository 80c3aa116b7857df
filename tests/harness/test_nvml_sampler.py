"""NVML read through the timing: a thread reads the card at 10 Hz or more while each block is
timed, and each block keeps the ranges of its SM clock, power, temperature and clock-event
reasons; the handle is found by the UUID torch reports, never by NVML's index.

pynvml cannot exist on this machine (no GPU, no driver): these tests inject a small fake NVML
module (`FakeNvml`, installed as `pynvml` in sys.modules for the test) and a fake torch device
whose UUID names one of the fake's two cards. The fake's card runs at 1,980 MHz and 300 W until
its power cap arrives after a few readings (1,755 MHz, 700 W, `sw_power_cap`), so a sampler that
read only once, before or after, could not show both."""

import sys
import time
import types

import pytest

from registry.reruns.harness import timing
from registry.stats import medians as stats
from tests.harness.test_blocks import in_process

CARD = "GPU-5e1f0c2a-0000-4000-8000-00000000000b"
OTHER = "GPU-5e1f0c2a-0000-4000-8000-00000000000a"  # NVML's index 0, which a worker must not read


class FakeNvml(types.ModuleType):
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, cap_after: int = 4):
        super().__init__("pynvml")
        self.cap_after, self.reads, self.asked = cap_after, 0, []

    def capped(self, handle) -> bool:
        return handle == CARD and self.reads > self.cap_after

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self.asked.append(uuid)
        if uuid not in (CARD, OTHER):
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return uuid

    def nvmlDeviceGetHandleByIndex(self, index):
        raise AssertionError("NVML's index ignores CUDA_VISIBLE_DEVICES")

    def nvmlDeviceGetClockInfo(self, handle, kind):
        if kind == self.NVML_CLOCK_SM:
            self.reads += 1
            return 1755 if self.capped(handle) else 1980
        return 3201

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 40 + min(self.reads, 20)

    def nvmlDeviceGetPowerUsage(self, handle):
        return 700_000 if self.capped(handle) else 300_000

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x4 if self.capped(handle) else 0x0


def fake_torch():
    props = types.SimpleNamespace(
        uuid=CARD.removeprefix("GPU-"), pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=0
    )
    cuda = types.SimpleNamespace(current_device=lambda: 0, get_device_properties=lambda index: props)
    return types.SimpleNamespace(cuda=cuda)


@pytest.fixture
def fake_nvml(monkeypatch):
    module = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def test_the_handle_is_the_card_torch_reports_by_uuid(fake_nvml):
    nvml = timing.Nvml(fake_torch())

    assert (nvml.uuid, nvml.handle, nvml.error) == (CARD, CARD, "")
    assert fake_nvml.asked == [CARD]


def test_the_sampler_reads_at_ten_hz_or_more_and_sees_the_cap_arrive(fake_nvml):
    nvml = timing.Nvml(fake_torch())

    with timing.NvmlSampler(nvml) as sampler:
        time.sleep(0.6)
    summary = sampler.summary()

    assert summary["readings"] >= 6 and summary["hz"] >= 10
    assert summary["sm_clock_mhz"]["min"] == 1755 and summary["sm_clock_mhz"]["max"] == 1980
    assert summary["power_w"]["min"] == 300 and summary["power_w"]["max"] == 700
    assert summary["temperature_c"]["max"] > summary["temperature_c"]["min"]
    assert 0 < summary["reasons"]["sw_power_cap"] < 1  # the cap arrived during the block


def test_without_nvml_a_block_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    nvml = timing.Nvml(fake_torch())

    with timing.NvmlSampler(nvml) as sampler:
        pass

    assert "NVML unavailable" in sampler.summary()["error"]


def test_a_measurement_keeps_each_blocks_ranges_and_no_before_after_pair(monkeypatch, fake_nvml):
    nvml = timing.Nvml(fake_torch())

    result, _, _ = in_process(monkeypatch, nvml=nvml, budget_s=1.5, precision=1e-9)

    state = result["gpu_state"]
    assert "before" not in state and "after" not in state
    assert state["uuid"] == CARD and state["sampled_hz"] >= 10
    assert len(state["blocks"]) == len(result["measured"]["blocks"]) == 3
    for block in state["blocks"]:
        assert block["readings"] >= 2
        assert {"sm_clock_mhz", "power_w", "temperature_c", "reasons"} <= set(block)
    # The cap arrived in the first block and stayed: the job says it throttled while timed.
    assert state["throttled"] == ["sw_power_cap"]
    assert state["blocks"][-1]["sm_clock_mhz"] == {"min": 1755, "median": 1755, "max": 1755}
    assert stats.relative_precision(result["samples"], 0.99) > 0
