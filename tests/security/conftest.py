"""The roles of the authorization matrix and the objects they act on.

Roles, in the order the matrix lists them:
- visitor: no session, no token.
- owner: a contributor (session) who filed the attestation, the issue report and holds a token.
- other: another contributor (session) who owns nothing here.
- moderator: a member of the `moderators` group, made one by `services.moderator_add` (so staff).
- worker: the GPU worker's HTTP credential. Workers have none today (they talk to the broker
  and the database only); if one is ever issued it is a DRF token of a dedicated user in the
  `gpu-workers` group, with no password, no email address and no permission. It is sent as
  `Authorization: Token …` on every request, HTML pages included.
- revoked: a contributor who had a session and a token, then was deactivated: the session
  cookie and the token are both still sent.
"""

from dataclasses import dataclass

import pytest
from allauth.socialaccount.models import SocialAccount, SocialApp, SocialToken
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from attestations import services as attestation_services
from attestations.models import IssueReport
from registry.models import BenchmarkRun, SourceSync
from registry.reruns.models import MeasuredCeiling, RerunJob, WorkerKey
from registry.reruns.services import rerun_request
from registry.sources.liger.services import liger_import
from tests.attestations.conftest import (  # noqa: F401 (autouse fixtures, shared with the attestations tests)
    REFERENCE_ID,
    clean_cache,
    eager_celery,
    reference_slice,
)
from tests.conftest import make_user, moderators_group_ensure

ROLES = ("visitor", "owner", "other", "moderator", "worker", "revoked")
SESSION_ROLES = ("owner", "other", "moderator", "revoked")


@dataclass
class World:
    run: BenchmarkRun
    memory_run: BenchmarkRun
    users: dict
    tokens: dict
    attestation: object  # the owner's pending reproduction
    approved: object  # the owner's approved note
    report: IssueReport  # the owner's open issue report
    job: RerunJob

    def client(self, role: str, **kwargs) -> Client:
        """A fresh client carrying the role's credentials, from an address on the internet (not
        loopback, which /metrics trusts)."""
        kwargs.setdefault("REMOTE_ADDR", "203.0.113.10")
        client = Client(**kwargs)
        if role in SESSION_ROLES:
            # force_login does not check is_active: the revoked user's old session cookie.
            client.force_login(self.users[role])
        if role in ("worker", "revoked"):
            client.defaults["HTTP_AUTHORIZATION"] = f"Token {self.tokens[role]}"
        return client


def worker_user():
    user = get_user_model().objects.create_user(username="gpu-worker-a100", email="", password=None)
    group, _ = Group.objects.get_or_create(name=attestation_services.GPU_WORKERS_GROUP)
    user.groups.add(group)
    return user


def build_world(tmp_path) -> World:
    path = tmp_path / "reference.csv"
    path.write_text(reference_slice())
    liger_import(path=path)
    run = BenchmarkRun.objects.public().get(external_id=REFERENCE_ID)
    memory_run = BenchmarkRun.objects.public().get(metric="memory", implementation__provider="huggingface")
    moderators_group_ensure()
    users = {"owner": make_user("owner"), "other": make_user("other"), "revoked": make_user("revoked")}
    users["moderator"] = make_user("moderator")
    attestation_services.moderator_add(user=users["moderator"])
    users["moderator"] = get_user_model().objects.get(pk=users["moderator"].pk)
    users["worker"] = worker_user()
    tokens = {role: Token.objects.create(user=users[role]).key for role in ("owner", "worker", "revoked")}
    attestation = attestation_services.attestation_submit(
        run=run,
        author=users["owner"],
        kind="reproduction",
        median=145.0,
        p20=144.1,
        p80=146.3,
        unit="ms",
        gpu_product="NVIDIA A100 SXM4 80GB",
    )
    approved = attestation_services.attestation_submit(
        run=run, author=users["owner"], kind="note", text="Backward includes one forward."
    )
    attestation_services.attestation_approve(attestation=approved, moderator=users["moderator"])
    report = attestation_services.issue_report_create(
        run=run, reporter=users["owner"], category="wrong_value", description="The p80 looks off."
    )
    job = rerun_request(run=run, reason="matrix")
    # Something behind every admin page, so each row tests a permission, not a missing object.
    app = SocialApp.objects.create(provider="github", name="GitHub", client_id="id", secret="s")
    account = SocialAccount.objects.create(user=users["owner"], provider="github", uid="1")
    SocialToken.objects.create(app=app, account=account, token="t")
    SourceSync.objects.create(status=SourceSync.Status.FAILED, error="matrix")
    MeasuredCeiling.objects.create(
        gpu_slug="nvidia-h200",
        measured_at=timezone.now(),
        memory_bandwidth=4182.0,
        bf16_tflops=710.0,
        document={"format": "kernelindex-ceilings/v1"},
    )
    WorkerKey.objects.create(name="h200-matrix", gpu_slug="nvidia-h200", public_key="A" * 43 + "=", cards=[])
    get_user_model().objects.filter(pk=users["revoked"].pk).update(is_active=False)
    users["revoked"].refresh_from_db()
    return World(
        run=run,
        memory_run=memory_run,
        users=users,
        tokens=tokens,
        attestation=attestation,
        approved=approved,
        report=report,
        job=job,
    )


@pytest.fixture
def world(db, tmp_path):
    return build_world(tmp_path)
