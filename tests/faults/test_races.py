"""Item 5: races, with real threads each on its own PostgreSQL connection, and the broker's queue
counted in Redis.

20 moderators' requests for a rerun of one run at the same instant give one job and 19 clear
refusals (the partial unique constraint on active jobs decides); 20 approvals of one attestation
at the same instant give one decision and one audit entry; a request whose transaction rolls
back publishes no message."""

import threading

import pytest
from django.contrib.auth.models import User
from django.db import close_old_connections, connection, transaction
from django.test import Client
from django.urls import reverse

from attestations import services
from attestations.models import Attestation, AttestationState, AuditEntry
from registry.models import BenchmarkRun
from registry.reruns.models import RerunJob
from registry.reruns.services import rerun_request
from tests.attestations.conftest import submit_reproduction
from tests.conftest import make_user, moderators_group_ensure
from tests.faults.support import needs_postgresql, needs_redis, small_cpu_rows
from tests.reruns.conftest import csv_import
from tests.reruns.worker import queue_length

pytestmark = [pytest.mark.django_db(transaction=True), needs_redis]
CONCURRENT = 20


@pytest.fixture(autouse=True)
def on_postgresql(db):
    needs_postgresql()


def at_once(count: int, request) -> list:
    """Run `request(i)` in `count` threads released together; each thread's own connection is
    closed afterwards. Returns what each returned (or the exception it raised)."""
    barrier = threading.Barrier(count)
    outcomes = [None] * count

    def one(i):
        try:
            barrier.wait(timeout=30)
            outcomes[i] = request(i)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcomes[i] = exc
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


@pytest.fixture
def cpu_run(tmp_path, clean_broker):
    csv_import(tmp_path / "runs.csv", small_cpu_rows(1))
    return BenchmarkRun.objects.get()


def staff_moderators(count: int) -> list[User]:
    """Members of the `moderators` group: the request_rerun permission is theirs."""
    moderators_group_ensure()
    users = []
    for i in range(count):
        user = make_user(f"moderator{i}")
        services.moderator_add(user=user)
        users.append(user)
    return users


class TestConcurrentRerunRequests:
    def test_twenty_at_once_give_one_job_and_nineteen_clear_refusals(self, cpu_run):
        moderators = staff_moderators(CONCURRENT)
        url = reverse("admin:registry_benchmarkrun_changelist")
        form = {"action": "request_rerun", "_selected_action": [cpu_run.pk], "apply": "1", "reason": "race"}

        def request(i):
            client = Client()
            client.force_login(moderators[i])
            response = client.post(url, form, follow=True)
            return response.status_code, response.content.decode()

        outcomes = at_once(CONCURRENT, request)

        assert all(isinstance(o, tuple) and o[0] == 200 for o in outcomes), outcomes
        queued = [html for _, html in outcomes if "1 rerun job(s) queued." in html]
        refused = [html for _, html in outcomes if f"Run {cpu_run.pk} already has an active rerun" in html]
        assert (len(queued), len(refused)) == (1, CONCURRENT - 1)
        assert RerunJob.objects.filter(run=cpu_run).count() == 1
        assert queue_length("gpu.cpu") == 1  # the refusals published nothing


class TestConcurrentApprovals:
    def test_twenty_at_once_give_one_decision_and_one_audit_entry(self, cpu_run):
        moderators_group_ensure()
        moderator = make_user("mod")
        services.moderator_add(user=moderator)
        author = make_user("ada")
        attestation = submit_reproduction(cpu_run, author, unit="ms", gpu_product="CPU")
        url = reverse("admin:attestations_attestation_decide", args=[attestation.pk, "approve"])

        def approve(i):
            client = Client()
            client.force_login(moderator)
            return client.post(url, {"reason": ""}).status_code

        statuses = at_once(CONCURRENT, approve)

        assert sorted(statuses).count(302) == 1, statuses  # the one that decided
        assert sorted(statuses).count(200) == CONCURRENT - 1  # the reason page again, with why
        attestation.refresh_from_db()
        assert attestation.state == AttestationState.APPROVED
        entries = AuditEntry.objects.filter(object_id=attestation.pk, action=AttestationState.APPROVED)
        assert entries.count() == 1
        assert Attestation.objects.count() == 1


class TestRolledBackRequests:
    def test_a_request_whose_transaction_rolls_back_publishes_no_message(self, cpu_run):
        moderator = staff_moderators(1)[0]
        client = Client()
        client.force_login(moderator)
        url = reverse("admin:registry_benchmarkrun_changelist")
        form = {"action": "request_rerun", "_selected_action": [cpu_run.pk], "apply": "1", "reason": "x"}

        with pytest.raises(RuntimeError), transaction.atomic():
            assert client.post(url, form).status_code == 302
            assert RerunJob.objects.count() == 1  # created inside the transaction...
            raise RuntimeError("the request fails after the service ran")

        assert RerunJob.objects.count() == 0  # ...and rolled back with it
        assert queue_length("gpu.cpu") == 0

    def test_a_committed_request_publishes_exactly_one_message(self, cpu_run):
        rerun_request(run=cpu_run)
        assert queue_length("gpu.cpu") == 1
