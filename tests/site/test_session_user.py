"""The signed-in user, and an API token with its user, are read with SQL compiled once per process
(kernelindex/auth.py): the same user and token as the ORM's `get()`, the same refusals (an inactive
user, a changed password, a deleted user, an unknown token), and sessions that name Django's or
allauth's backend by their former paths still sign in."""

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from kernelindex import auth
from tests.conftest import make_user

ACCOUNT = "Account (ada)"


def _signed_in(client) -> bool:
    page = client.get(reverse("registry:home"))
    assert page.status_code == 200
    return ACCOUNT in page.content.decode()


@pytest.mark.django_db
class TestTheUserIsTheOneTheOrmReads:
    def test_every_field_matches(self, contributor):
        contributor.last_login = contributor.date_joined
        contributor.save()
        read = auth.user_by_pk(str(contributor.pk))
        expected = get_user_model().objects.get(pk=contributor.pk)
        fields = [field.attname for field in get_user_model()._meta.concrete_fields]
        assert [getattr(read, name) for name in fields] == [getattr(expected, name) for name in fields]
        assert read._state.db == "default" and not read._state.adding

    def test_no_such_user_is_none(self, db):
        assert auth.user_by_pk(10**9) is None


@pytest.mark.django_db
class TestSignedInSessions:
    def test_a_signed_in_visitor_is_recognised(self, client, contributor):
        client.force_login(contributor)
        assert _signed_in(client)

    def test_an_inactive_user_is_signed_out(self, client, contributor):
        client.force_login(contributor)
        contributor.is_active = False
        contributor.save()
        assert not _signed_in(client)

    def test_a_changed_password_signs_other_sessions_out(self, client, contributor):
        client.force_login(contributor)
        contributor.set_password("another password entirely")
        contributor.save()
        assert not _signed_in(client)

    @pytest.mark.parametrize("former", list(auth.LEGACY_BACKENDS))
    def test_a_session_naming_a_former_backend_path_stays_signed_in(self, client, former):
        user = make_user("ada")
        client.force_login(user)
        session = client.session
        session[BACKEND_SESSION_KEY] = former
        session.save()
        assert _signed_in(client)
        assert client.session[BACKEND_SESSION_KEY] == auth.LEGACY_BACKENDS[former]
        assert client.session[SESSION_KEY] == str(user.pk) and client.session[HASH_SESSION_KEY]
        assert _signed_in(client)


@pytest.mark.django_db
class TestApiTokens:
    ME = "/api/v1/runs/"  # any API page: what matters is the answer to the header

    def answer(self, key: str):
        return APIClient().get(self.ME, HTTP_AUTHORIZATION=f"Token {key}")

    def test_a_token_reads_its_user_as_the_orm_does(self, contributor):
        token = Token.objects.create(user=contributor)
        user, read = auth.TokenAuthentication().authenticate_credentials(token.key)
        assert (read.key, read.user_id, read.created) == (token.key, contributor.pk, token.created)
        assert user.pk == contributor.pk and read.user is user and user.is_active
        assert self.answer(token.key).status_code == 200

    def test_an_unknown_token_is_refused_with_drfs_words(self, db):
        answer = self.answer("0" * 40)
        assert answer.status_code == 403 and answer.json() == {
            "detail": "Invalid token."
        }  # DRF: 403 where session auth comes first

    def test_an_inactive_users_token_is_refused(self, contributor):
        token = Token.objects.create(user=contributor)
        contributor.is_active = False
        contributor.save()
        answer = self.answer(token.key)
        assert answer.status_code == 403 and answer.json() == {"detail": "User inactive or deleted."}
