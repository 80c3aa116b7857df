"""`manage.py worker_key`: an operator makes (on the GPU host), registers, lists and revokes worker
keys; a bad registration is refused with its reason and stores nothing."""

import io
import stat

import pytest
from django.core.management import CommandError, call_command

from registry.reruns.models import WorkerKey
from registry.reruns.services import signing

pytestmark = pytest.mark.django_db
CARD = "GPU-5e1f0c2a-0000-4000-8000-000000000001"


def run(*args) -> str:
    out = io.StringIO()
    call_command("worker_key", *args, stdout=out)
    return out.getvalue().strip()


def test_generate_register_list_and_revoke(tmp_path):
    key_file = tmp_path / "h200-a-1.key"
    public = run("generate", "--out", str(key_file))
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert signing.public_key_load(public)  # 32 bytes, base64
    assert "PRIVATE KEY" in key_file.read_text() and public not in key_file.read_text()

    run("register", "h200-a-1", "--gpu", "nvidia-h200", "--public-key", public, "--card", CARD)
    key = WorkerKey.objects.get(name="h200-a-1")
    assert (key.gpu_slug, key.cards, key.revoked_at) == ("nvidia-h200", [CARD], None)
    assert f"h200-a-1\tnvidia-h200\tactive\t{public}\t{CARD}" in run("list")

    assert run("revoke", "h200-a-1") == "revoked h200-a-1"
    assert "\trevoked " in run("list")
    with pytest.raises(CommandError, match="no unrevoked worker key named h200-a-1"):
        run("revoke", "h200-a-1")


def test_a_key_file_is_never_overwritten(tmp_path):
    key_file = tmp_path / "k.key"
    key_file.write_text("keep me")
    with pytest.raises(CommandError, match="exists"):
        run("generate", "--out", str(key_file))
    assert key_file.read_text() == "keep me"


@pytest.mark.parametrize(
    "args, reason",
    [
        (["--public-key", "not base64!"], "public_key"),
        (["--public-key", "QUJD"], "public_key"),  # 3 bytes
        (["--card", "GPU-x; rm -rf /"], "cards"),
        ([], "cards"),  # a GPU worker names its cards
    ],
)
def test_a_bad_registration_is_refused_and_stores_nothing(args, reason):
    _, public = signing.private_key_generate()
    argv = ["register", "h200-b", "--gpu", "nvidia-h200", *args]
    if "--public-key" not in args:
        argv += ["--public-key", public]
    if "--card" not in args and reason != "cards":
        argv += ["--card", CARD]
    before = WorkerKey.objects.count()
    with pytest.raises(CommandError, match=reason):
        run(*argv)
    assert WorkerKey.objects.count() == before


def test_a_name_or_a_key_registered_twice_is_refused():
    _, public = signing.private_key_generate()
    run("register", "h200-c", "--gpu", "nvidia-h200", "--public-key", public, "--card", CARD)
    _, other = signing.private_key_generate()
    with pytest.raises(CommandError, match="rotate under a new name"):
        run("register", "h200-c", "--gpu", "nvidia-h200", "--public-key", other, "--card", CARD)
    with pytest.raises(CommandError, match="registered already"):
        run("register", "h200-d", "--gpu", "nvidia-h200", "--public-key", public, "--card", CARD)


def test_job_key_prints_the_public_half_of_the_signing_key():
    printed = run("job-key")
    assert printed == signing.public_key_text(signing.job_signing_key())
    assert len(printed) == 44
