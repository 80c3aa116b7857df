"""A GPU host that reaches no package index: the wheelhouse, and the harness from a local archive.

The fast tests run everywhere, with the network blocked. The end-to-end one builds a real
wheelhouse from PyPI for this interpreter, installs it into a fresh virtualenv with no index and an
unreachable proxy, unpacks the harness with `fetch_harness --archive`, and runs a CPU job there.
It takes about three minutes, so it runs only when asked:

    KERNELINDEX_TEST_OFFLINE_INSTALL=1 .venv/bin/python -m pytest tests/ops/test_offline_worker.py
"""

import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from registry.reruns.harness import upstream
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def load_wheelhouse():
    return load_script("wheelhouse")


def fake_sdist(path: Path, version: str = "0.8.5") -> str:
    """A .tar.gz laid out like liger-kernel's sdist; returns its sha256."""
    top = f"liger_kernel-{version}"
    members = {
        "PKG-INFO": f"Metadata-Version: 2.1\nName: liger-kernel\nVersion: {version}\n",
        "LICENSE": "BSD 2-Clause License\n",
        "benchmark/scripts/utils.py": "QUANTILES = [0.5, 0.2, 0.8]\n",
        "benchmark/scripts/benchmark_geglu.py": "from utils import QUANTILES\n",
        "benchmark/data/all_benchmark_data.csv": "kernel_name\n",
        "test/utils.py": "",
        "test/resources/huge.bin": "x" * 100,
        "src/liger_kernel/__init__.py": "",
        "setup.py": "raise SystemExit('never built')\n",
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


@pytest.fixture
def offline(monkeypatch):
    """No socket connects and no subprocess (pip) runs: any attempt fails the test."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise AssertionError(f"tried to reach the network or run pip: {args[:2]}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(upstream.subprocess, "run", refuse)
    return attempts


@pytest.fixture
def harness_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELINDEX_HARNESS_DIR", str(tmp_path / "harness"))
    monkeypatch.delenv(upstream.ARCHIVE_ENV, raising=False)
    return tmp_path / "harness"


@pytest.fixture
def wheelhouse(tmp_path, monkeypatch):
    """A folder holding a fake liger-kernel 0.8.5 sdist, pinned as the real one is."""
    folder = tmp_path / "wheelhouse"
    folder.mkdir()
    digest = fake_sdist(folder / "liger_kernel-0.8.5.tar.gz")
    monkeypatch.setitem(upstream.LIGER_KERNEL_SHA256, "0.8.5", digest)
    return folder


class TestFetchHarnessFromALocalArchive:
    def test_a_wheelhouse_folder_is_unpacked_with_the_network_blocked(self, wheelhouse, harness_dir, offline):
        out = io.StringIO()
        call_command("fetch_harness", archive=str(wheelhouse), stdout=out)

        root = harness_dir / "liger-kernel-0.8.5"
        assert upstream.harness_ready() == root.resolve()
        assert (root / "benchmark/scripts/benchmark_geglu.py").is_file()
        assert (root / "src/liger_kernel/__init__.py").is_file()
        assert (root / "test/utils.py").is_file()
        assert not (root / "test/resources").exists()
        assert not (root / "setup.py").exists()  # unpacked, never built
        assert "liger-kernel 0.8.5 harness in" in out.getvalue()
        assert offline == []

    def test_the_archive_file_itself_and_the_environment_variable_work_too(
        self, wheelhouse, harness_dir, offline, monkeypatch
    ):
        call_command(
            "fetch_harness", archive=str(wheelhouse / "liger_kernel-0.8.5.tar.gz"), stdout=io.StringIO()
        )
        assert upstream.harness_ready()

        monkeypatch.setenv(upstream.ARCHIVE_ENV, str(wheelhouse))
        root = upstream.harness_fetch(force=True)
        assert (root / "benchmark/scripts/utils.py").is_file()
        assert offline == []

    def test_an_archive_with_another_sha256_is_refused_and_nothing_is_unpacked(
        self, tmp_path, harness_dir, offline
    ):
        tampered = tmp_path / "liger_kernel-0.8.5.tar.gz"
        digest = fake_sdist(tampered)

        with pytest.raises(CommandError) as refused:
            call_command("fetch_harness", archive=str(tampered), stdout=io.StringIO())

        message = str(refused.value)
        assert "is not the liger-kernel 0.8.5 source distribution" in message
        assert f"its sha256 is {digest}" in message
        assert upstream.LIGER_KERNEL_SHA256["0.8.5"] in message
        assert not harness_dir.exists()
        with pytest.raises(upstream.HarnessMissing):
            upstream.harness_ready()
        assert offline == []

    def test_a_bad_archive_is_refused_even_when_a_harness_is_already_there(
        self, wheelhouse, harness_dir, tmp_path, offline
    ):
        call_command("fetch_harness", archive=str(wheelhouse), stdout=io.StringIO())
        other = tmp_path / "other" / "liger_kernel-0.8.5.tar.gz"
        other.parent.mkdir()
        fake_sdist(other, version="0.8.5-tampered")

        with pytest.raises(CommandError, match="sha256"):
            call_command("fetch_harness", archive=str(other), stdout=io.StringIO())

    def test_a_folder_without_the_archive_says_which_file_it_looked_for(self, tmp_path, harness_dir, offline):
        with pytest.raises(CommandError) as refused:
            call_command("fetch_harness", archive=str(tmp_path), stdout=io.StringIO())

        assert "no liger-kernel 0.8.5 source archive (liger_kernel-0.8.5.tar.gz" in str(refused.value)
        assert str(tmp_path) in str(refused.value)

    def test_a_version_with_no_pinned_sha256_needs_one_given(self, tmp_path, harness_dir, offline):
        archive = tmp_path / "liger_kernel-0.9.0.tar.gz"
        digest = fake_sdist(archive, version="0.9.0")

        with pytest.raises(CommandError, match="no sha256 is pinned for liger-kernel 0.9.0"):
            call_command("fetch_harness", archive=str(archive), liger_version="0.9.0", stdout=io.StringIO())

        call_command(
            "fetch_harness", archive=str(archive), liger_version="0.9.0", sha256=digest, stdout=io.StringIO()
        )
        assert upstream.harness_ready("0.9.0")

    def test_the_pinned_digest_is_the_one_pypi_publishes_for_0_8_5(self):
        # https://pypi.org/simple/liger-kernel/ : liger_kernel-0.8.5.tar.gz#sha256=...
        assert upstream.LIGER_KERNEL_VERSION == "0.8.5"
        assert upstream.LIGER_KERNEL_SHA256["0.8.5"] == (
            "4e8f8f611a8ad735c37c989410d09820bb08881f131851a3967c34baa7889d66"
        )


class TestWorkerRequirements:
    def test_the_worker_requirements_never_name_torch_or_triton(self):
        wheelhouse = load_wheelhouse()
        names = {
            wheelhouse.requirement_name(line)
            for line in wheelhouse.requirement_lines(ROOT / "requirements-worker.txt")
        }
        assert "transformers" in names
        assert not names & {"torch", "triton", "liger-kernel"}

    def test_on_the_h200_image_no_requirement_replaces_what_the_host_has(self):
        """numpy, scipy, transformers: unpinned, or pinned (for Python 3.12) at the image's own
        version; a pin of anything else would make pip replace the host's copy, or fail offline."""
        wheelhouse = load_wheelhouse()
        env = wheelhouse.marker_env("3.12", wheelhouse.MANYLINUX_X86_64)
        known = wheelhouse.H200_KNOWN_VERSIONS
        checked = set()
        for path in (ROOT / "requirements.txt", ROOT / "requirements-worker.txt"):
            for line in wheelhouse.requirement_lines(path):
                name, _specifier, applies = wheelhouse.parse_requirement(line)
                if applies(env) and name in {"numpy", "scipy", "transformers", "nvidia-ml-py", "psutil"}:
                    checked.add(name)
                    pin = wheelhouse.requirement_pin(line)
                    assert pin is None or pin == known.get(name), line
                    assert "<" not in line.split(";")[0], line
        assert {"transformers", "nvidia-ml-py"} <= checked

    def test_the_torch_rule_is_stated_once(self):
        texts = [(ROOT / name).read_text() for name in ("requirements.txt", "requirements-worker.txt")]
        assert not any("torch==" in text for text in texts)


class TestWheelhouseChecks:
    @pytest.mark.parametrize(
        "name, fits",
        [
            ("django-5.2.19-py3-none-any.whl", True),
            ("six-1.17.0-py2.py3-none-any.whl", True),
            ("psycopg_binary-3.3.9-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", True),
            ("wcwidth-0.9.4-cp310-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", True),
            ("psycopg_binary-3.3.9-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", False),
            ("psycopg_binary-3.3.9-cp312-cp312-macosx_11_0_arm64.whl", False),
            ("rpds_py-2026.9.1-cp312-cp312-manylinux_2_34_x86_64.whl", False),
            ("thing-1.0-cp313-abi3-manylinux_2_17_x86_64.whl", False),
        ],
    )
    def test_a_wheel_fits_cpython_3_12_manylinux_x86_64_or_not(self, name, fits):
        wheelhouse = load_wheelhouse()
        assert (
            wheelhouse.wheel_fits(name, python_version="3.12", platforms=wheelhouse.MANYLINUX_X86_64) is fits
        )

    def test_two_versions_of_one_package_or_a_torch_wheel_are_refused(self, tmp_path):
        wheelhouse = load_wheelhouse()
        for name in (
            "click-8.5.1-py3-none-any.whl",
            "click-8.3.1-py3-none-any.whl",
            "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        ):
            (tmp_path / name).write_bytes(b"")
        with pytest.raises(RuntimeError) as refused:
            wheelhouse.check(tmp_path, python_version="3.12", platforms=wheelhouse.MANYLINUX_X86_64)
        assert "click: more than one version (8.3.1, 8.5.1)" in str(refused.value)
        assert "the host brings its own torch" in str(refused.value)

    def test_requirement_files_are_read_with_their_includes_pins_and_extras(self, tmp_path):
        wheelhouse = load_wheelhouse()
        (tmp_path / "base.txt").write_text("# web\nDjango==5.2.19\npsycopg[binary]==3.3.9  # driver\n")
        (tmp_path / "worker.txt").write_text("-r base.txt\n--index-url https://example.org\nscipy>=1.11\n")
        lines = wheelhouse.requirement_lines(tmp_path / "worker.txt")
        assert lines == ["Django==5.2.19", "psycopg[binary]==3.3.9", "scipy>=1.11"]
        assert [wheelhouse.requirement_pin(line) for line in lines] == ["5.2.19", "3.3.9", None]
        assert [wheelhouse.requirement_name(line) for line in lines] == ["django", "psycopg", "scipy"]


def _offline_env(**extra) -> dict:
    """No index, no pip configuration, and a proxy that refuses every connection."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and "proxy" not in k.lower()}
    unreachable = "http://127.0.0.1:9"
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        http_proxy=unreachable,
        https_proxy=unreachable,
        HTTP_PROXY=unreachable,
        HTTPS_PROXY=unreachable,
        **extra,
    )
    return env


def _torch_wheel() -> Path | None:
    """The CPU torch wheel this machine keeps on disk (pip's find-links), standing in for the
    torch a GPU host brings."""
    links = os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split()
    for folder in map(Path, links):
        found = sorted(folder.glob("torch-*.whl")) if folder.is_dir() else []
        tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
        found = [w for w in found if f"-{tag}-" in w.name]
        if found:
            return found[-1]
    return None


@pytest.mark.skipif(
    not os.environ.get("KERNELINDEX_TEST_OFFLINE_INSTALL"),
    reason="builds a wheelhouse from PyPI and installs it into a fresh virtualenv (about 3 minutes); "
    "set KERNELINDEX_TEST_OFFLINE_INSTALL=1",
)
@pytest.mark.timeout(900)
def test_a_fresh_worker_installs_and_runs_from_a_wheelhouse_alone(tmp_path):
    torch_wheel = _torch_wheel()
    if torch_wheel is None:
        pytest.skip("no torch wheel on this machine to stand in for the host's own torch")
    python = sys.executable

    # 1. On a connected machine: the wheelhouse, for this interpreter.
    wheels = tmp_path / "wheelhouse"
    built = subprocess.run(
        [python, str(ROOT / "scripts" / "wheelhouse.py"), "--dest", str(wheels)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "Total:" in built.stdout
    assert (wheels / "liger_kernel-0.8.5.tar.gz").is_file()
    assert not list(wheels.glob("torch-*")) and not list(wheels.glob("triton-*"))

    # 2. The host: a fresh virtualenv that has its own torch (and torch's own needs), nothing else.
    host = tmp_path / "host"
    venv.EnvBuilder(with_pip=True).create(host)
    host_python = str(host / "bin" / "python")
    torch_needs = tmp_path / "torch-needs"
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "download",
            "-q",
            "--only-binary=:all:",
            "--dest",
            str(torch_needs),
            "--find-links",
            str(torch_wheel.parent),
            str(torch_wheel),
        ],
        check=True,
        cwd=tmp_path,
    )
    offline = _offline_env()

    def host_run(*args, **kwargs):
        done = subprocess.run(
            [host_python, *args], capture_output=True, text=True, env=offline, cwd=ROOT, **kwargs
        )
        assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    host_run(
        "-m",
        "pip",
        "install",
        "-q",
        "--no-compile",
        "--no-index",
        "--find-links",
        str(torch_needs),
        str(torch_wheel),
    )

    # 3. The README's install, offline, exactly: the host's torch is kept.
    host_run(
        "-m",
        "pip",
        "install",
        "-q",
        "--no-compile",
        "--no-index",
        "--find-links",
        str(wheels),
        "-r",
        "requirements.txt",
        "-r",
        "requirements-worker.txt",
    )
    freeze = host_run("-m", "pip", "list", "--format=json").stdout
    installed = {p["name"].lower(): p["version"] for p in json.loads(freeze)}
    assert installed["torch"] == torch_wheel.name.split("-")[1]
    assert "triton" not in installed
    host_run("-m", "pip", "check")

    # 4. The harness from the wheelhouse, no network; then a CPU job through it.
    harness = tmp_path / "harness"
    worker_env = _offline_env(
        KERNELINDEX_HARNESS_DIR=str(harness),
        KERNELINDEX_VAR_DIR=str(tmp_path / "var"),
        DEBUG="1",
        DJANGO_SETTINGS_MODULE="kernelindex.settings",
    )
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"):
        worker_env.pop(name, None)
    fetched = subprocess.run(
        [host_python, "manage.py", "fetch_harness", "--archive", str(wheels)],
        capture_output=True,
        text=True,
        env=worker_env,
        cwd=ROOT,
    )
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    assert (harness / "liger-kernel-0.8.5" / "benchmark" / "scripts" / "utils.py").is_file()

    spec = {
        "kernel": "geglu",
        "provider": "huggingface",
        "operation_mode": "forward",
        "metric": "latency",
        "x_name": "T",
        "x_value": 64,
        "device": "cpu",
        "config": {
            "bsz": 2,
            "hidden_size": 128,
            "intermediate_size": 256,
            "hidden_act": "gelu_pytorch_tanh",
            "dtype": "torch.float32",
        },
    }
    job = (
        "import django, json, sys; django.setup()\n"
        "from registry.reruns.harness import run_job_spec\n"
        "print(json.dumps(run_job_spec(json.loads(sys.argv[1]), timeout_s=300)))\n"
    )
    ran = subprocess.run(
        [host_python, "-c", job, json.dumps(spec)],
        capture_output=True,
        text=True,
        env=worker_env,
        cwd=ROOT,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok", result["error"] + result.get("log", "")[-2000:]
    assert result["environment"]["liger_kernel"] == "0.8.5"
    assert result["median"] > 0
