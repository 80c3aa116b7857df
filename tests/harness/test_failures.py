"""Harness failures come back as results with the log; they never raise and never pass."""

import shutil
import textwrap

import pytest

from registry.reruns.harness import run_job_spec
from tests.harness.conftest import geglu_spec

pytestmark = pytest.mark.usefixtures("harness_root", "fresh_sessions")


@pytest.fixture
def crashing_harness(harness_root, tmp_path, monkeypatch):
    """A copy of the real harness whose geglu setup prints a line and then dies of SIGSEGV."""
    root = tmp_path / harness_root.name
    shutil.copytree(harness_root / "benchmark", root / "benchmark")
    (root / "src").symlink_to(harness_root / "src")
    (root / "benchmark" / "scripts" / "benchmark_geglu.py").write_text(
        textwrap.dedent(
            """
            import os, signal
            def setup_geglu(input):
                print("about to crash", flush=True)
                os.kill(os.getpid(), signal.SIGSEGV)
            """
        )
    )
    monkeypatch.setenv("KERNELINDEX_HARNESS_DIR", str(tmp_path))
    return root


class TestFailuresBecomeFailedResults:
    def test_a_job_past_its_time_limit_is_killed_and_failed(self):
        spec = geglu_spec(
            x_value=4096,
            config={**geglu_spec()["config"], "bsz": 8, "hidden_size": 2048, "intermediate_size": 8192},
        )

        result = run_job_spec(spec, timeout_s=3)

        assert result["status"] == "failed"
        assert "timed out" in result["error"] and result["timed_out"] is True
        assert result["median"] is None

    def test_a_crash_is_failed_with_the_log_and_the_next_job_runs(
        self, crashing_harness, monkeypatch, harness_root
    ):
        crashed = run_job_spec(geglu_spec(), timeout_s=120)
        monkeypatch.setenv("KERNELINDEX_HARNESS_DIR", str(harness_root.parent))
        after = run_job_spec(geglu_spec(), timeout_s=120)

        assert crashed["status"] == "failed" and crashed["timed_out"] is False
        assert "SIGSEGV" in crashed["error"]
        assert "about to crash" in crashed["log"]
        assert after["status"] == "ok", after["error"]

    def test_a_missing_harness_is_failed_saying_how_to_fetch_it(self, tmp_path, monkeypatch):
        monkeypatch.setenv("KERNELINDEX_HARNESS_DIR", str(tmp_path / "empty"))

        result = run_job_spec(geglu_spec(), timeout_s=10)

        assert result["status"] == "failed"
        assert "fetch_harness" in result["error"]
