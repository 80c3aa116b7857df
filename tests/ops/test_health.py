"""/healthz and /readyz: what a load balancer and an orchestrator ask."""

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.urls import reverse


class TestHealthz:
    def test_healthz_answers_without_touching_the_database(self, client):
        # No django_db mark: any query would raise here.
        response = client.get(reverse("healthz"))

        assert response.status_code == 200
        assert response.json() == {"status": "ok"}
        assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db
class TestReadyz:
    def test_ready_when_database_cache_broker_answer_and_migrations_are_applied(self, client):
        response = client.get(reverse("readyz"))

        assert response.status_code == 200
        body = response.json()
        assert body["status"] == "ok"
        assert {name: check["ok"] for name, check in body["checks"].items()} == {
            "database": True,
            "migrations": True,
            "cache": True,
            "broker": True,
        }

    def test_not_ready_while_a_migration_is_pending(self, client):
        latest = MigrationRecorder.Migration.objects.filter(app="registry").order_by("-name").first()
        MigrationRecorder(connection).record_unapplied("registry", latest.name)

        response = client.get(reverse("readyz"))

        assert response.status_code == 503
        assert response.json()["checks"]["migrations"] == {
            "ok": False,
            "error": "1 migration(s) not applied",
            "ms": response.json()["checks"]["migrations"]["ms"],
        }

    def test_not_ready_when_the_cache_loses_what_it_was_given(self, client, settings):
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}

        response = client.get(reverse("readyz"))

        assert response.status_code == 503
        assert response.json()["checks"]["cache"]["ok"] is False
        assert response.json()["checks"]["database"]["ok"] is True

    def test_not_ready_when_the_broker_does_not_answer(self, client, monkeypatch):
        from kernelindex.celery import app

        saved = app.conf.broker_url, app.conf.broker_transport
        dead = "redis://127.0.0.1:9/0"  # the discard port: nothing listens
        monkeypatch.setenv("CELERY_BROKER_URL", dead)  # Celery prefers the environment's
        # The embedded broker names its transport class, which would win over the URL's scheme.
        app.conf.broker_url, app.conf.broker_transport = dead, None
        try:
            response = client.get(reverse("readyz"))
        finally:
            app.conf.broker_url, app.conf.broker_transport = saved

        assert response.status_code == 503
        broker = response.json()["checks"]["broker"]
        assert broker["ok"] is False and "127.0.0.1" not in str(broker)
