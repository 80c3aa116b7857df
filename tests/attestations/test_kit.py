"""The reproduction kit, end to end on the CPU: installed with pip from the running test server's
own URL into a fresh virtual environment, it reproduces a CPU run, uploads the file with an API
token, and the reproduction is pending with its figures computed from the file's samples. The
same file tampered with, filed on another run, or over the size limit is refused, storing nothing.

The fresh environment gets no package index and none of the project's packages. What it sees
besides its own pip is what a GPU host's image brings (docs/reruns.md): torch, transformers, numpy,
scipy and nvidia-ml-py with their dependencies, and nothing else (no Django, no DRF). They are
the project venv's own installed copies, exposed through one .pth file pointing at a folder of
links to exactly those distributions: honest (the kit must find its dependencies already
installed, as on that host, or pip fails with --no-index) and fast (no 200 MB torch wheel to
download or install)."""

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from attestations import services
from attestations.models import Attestation
from registry.models import BenchmarkRun
from registry.reruns.kit.result import content_digest
from registry.stats import medians as stats
from tests.faults.support import small_cpu_rows
from tests.reruns.conftest import csv_import

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("harness_root")]

HOST_IMAGE = ("torch", "transformers", "numpy", "scipy", "nvidia-ml-py")


def host_image(folder: Path) -> Path:
    """A folder of links to HOST_IMAGE and everything they require, from this interpreter's site-packages."""
    folder.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    todo, seen = list(HOST_IMAGE), set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        dist = importlib.metadata.distribution(name)
        for requirement in map(Requirement, dist.requires or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            if (site / top).exists() and not (folder / top).exists() and top != "__pycache__":
                (folder / top).symlink_to(site / top)
    return folder


@pytest.fixture(scope="module")
def kit_venv(tmp_path_factory):
    """A fresh virtual environment whose only extra packages are the host image's."""
    base = tmp_path_factory.mktemp("kit")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "host_image.pth").write_text(str(host_image(base / "image")) + "\n")
    return venv


@pytest.fixture
def cpu_runs(tmp_path, settings):
    # A short sampling budget: the CPU run takes a second of timing, not three.
    settings.CONTROLLED_TIMING = {**settings.CONTROLLED_TIMING, "budget_s": 0.3}
    csv_import(tmp_path / "runs.csv", small_cpu_rows(2))
    return list(BenchmarkRun.objects.public().filter(environment__slug="cpu").order_by("pk"))


def post(url: str, body: bytes, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_kit_from_the_site_reproduces_a_cpu_run_and_files_it(
    live_server, kit_venv, cpu_runs, contributor, tmp_path, settings, harness_root
):
    run, other = cpu_runs
    token = services.api_token_regenerate(user=contributor).key
    page = urllib.request.urlopen(live_server.url + run.get_absolute_url()).read().decode()
    install = re.search(r"pip install (\S+\.tar\.gz)", page)[1]
    command = re.search(r"kernelindex-repro (\S+)", page)[1]
    assert install.startswith(live_server.url + "/kit/kernelindex-kit-1.0+liger085.protocolv1.")
    assert command == live_server.url + run.get_absolute_url()

    env = {
        "PATH": f"{kit_venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "KERNELINDEX_HARNESS_DIR": str(Path(harness_root).parent),
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,
    }
    pip = subprocess.run(
        [kit_venv / "bin" / "python", "-m", "pip", "install", "--no-index", "--no-cache-dir", install],
        env=env,
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    no_django = subprocess.run(
        [kit_venv / "bin" / "python", "-c", "import django"], env=env, capture_output=True
    )
    assert no_django.returncode != 0  # the kit runs without the site's packages

    out = tmp_path / "result.json"
    repro = subprocess.run(
        [kit_venv / "bin" / "kernelindex-repro", command, "--upload", "--token", token, "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert repro.returncode == 0, repro.stdout[-3000:] + repro.stderr[-5000:]
    filed = Attestation.objects.get()
    assert f"Filed as reproduction #{filed.pk}" in repro.stdout
    document = json.loads(out.read_bytes())
    assert document["digest"] == content_digest(document)
    assert filed.state == Attestation.State.PENDING
    assert filed.origin == Attestation.Origin.FILE
    assert filed.run == run
    assert filed.samples == document["samples"]
    assert len(filed.samples) >= 10
    assert (filed.median, filed.p20, filed.p80) == stats.quantiles(document["samples"])
    assert (filed.ci_low, filed.ci_high) == stats.median_interval(document["samples"])
    assert filed.verdict in ("agrees", "disagrees", "inconclusive")
    assert filed.result["environment"]["gpu_slug"] == "cpu"
    assert filed.result["kit"]["protocol"] == "kernelindex-cpu-v1"
    assert filed.torch_version == document["environment"]["torch"]
    run.refresh_from_db()
    assert run.evidence_level == "reported"

    upload = live_server.url + f"/api/v1/runs/{run.pk}/reproductions/"
    tampered = dict(document, samples=[s * 0.5 for s in document["samples"]])
    status, body = post(upload, json.dumps(tampered).encode(), token)
    assert status == 400
    assert body["file"][0].startswith("digest: the file's content hashes to")

    status, body = post(live_server.url + f"/api/v1/runs/{other.pk}/reproductions/", out.read_bytes(), token)
    assert status == 400
    assert body["file"][0].startswith(f"run: this file reproduces run {run.pk}, not run {other.pk}")

    settings.REPRODUCTION_FILE_MAX_BYTES = len(out.read_bytes()) - 1
    status, body = post(upload, out.read_bytes(), token)
    assert status == 400
    assert body["file"][0].startswith(f"file: {len(out.read_bytes()):,} bytes; at most")
    assert Attestation.objects.count() == 1
