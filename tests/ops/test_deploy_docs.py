"""docs/deploy.md stays true: every environment variable the settings read is documented, and
every process of the Procfile has a systemd unit."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def variables_read_by_settings() -> set[str]:
    settings = (ROOT / "kernelindex" / "settings.py").read_text()
    read = set(re.findall(r'_env\(env\.\w+, "([A-Z0-9_]+)"', settings))
    read |= set(re.findall(r'environ\.Env\(\)\.\w+\("([A-Z0-9_]+)"', settings))
    return read


class TestDeployDocumentation:
    def test_every_environment_variable_read_by_settings_is_documented(self):
        read = variables_read_by_settings()
        documented = set(re.findall(r"`([A-Z0-9_]+)`", (ROOT / "docs" / "deploy.md").read_text()))

        assert read and sorted(read - documented) == []

    def test_every_environment_variable_read_by_settings_is_in_env_example(self):
        listed = set(re.findall(r"^#? ?([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))

        assert sorted(variables_read_by_settings() - listed) == []

    def test_every_procfile_process_has_a_systemd_unit(self):
        procfile = (ROOT / "deploy" / "Procfile").read_text()
        processes = {
            line.split(":")[0] for line in procfile.splitlines() if line and not line.startswith("#")
        }
        units = {p.name for p in (ROOT / "deploy" / "systemd").glob("*.service")}

        assert {"web", "worker", "beat", "release"} <= processes
        assert {
            "kernelindex-web.service",
            "kernelindex-worker.service",
            "kernelindex-beat.service",
            "kernelindex-gpu-worker@.service",
        } <= units
        gpu_unit = (ROOT / "deploy" / "systemd" / "kernelindex-gpu-worker@.service").read_text()
        assert "-Q gpu.%i " in gpu_unit and "--prefetch-multiplier 1" in gpu_unit
