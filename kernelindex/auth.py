"""Sign-in backends: Django's and allauth's, and DRF's token authentication, reading the
signed-in user's row (and a token's) with SQL built once.

Every signed-in request loads its user (`AuthenticationMiddleware` → `backend.get_user`), and the
ORM builds `User.objects.get(pk=…)` afresh each time: the filter, the select list and the
compilation were three quarters of loading the user and about a third of a signed-in page served
from the page cache (docs/performance.md, section 8). The statement is the ORM's own, compiled
once per process and database; the row goes through the same converters and `from_db` as a
queryset's, so the user is the one `get()` returns.

The backends keep their behaviour otherwise (`authenticate`, permissions, `user_can_authenticate`).
A session made before they were named here names Django's or allauth's class, which
`LEGACY_BACKENDS` maps to its successor (`AuthenticationMiddleware` below), so nobody is signed out
by the change.
"""

from allauth.account import auth_backends as allauth_backends
from django.contrib.auth import BACKEND_SESSION_KEY, backends, get_user_model
from django.contrib.auth import middleware as auth_middleware
from django.db import connections, router
from django.utils.functional import SimpleLazyObject
from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions

# Values no primary key and no token is: the one parameter of a compiled statement.
_PLACEHOLDERS = {"pk": -424242, "key": "\x00kernelindex-placeholder"}
_compiled: dict[tuple[str, str, str], tuple[str, list, dict]] = {}


def _statement(model, using: str, field: str) -> tuple[str, list, dict]:
    """The SQL of `model._default_manager.filter(<field>=…)` on `using`, its selected fields'
    attnames in column order, and the converters the compiler applies to each row's columns."""
    key = (model._meta.label, using, field)
    found = _compiled.get(key)
    if found is None:
        placeholder = _PLACEHOLDERS[field]
        compiler = model._default_manager.filter(**{field: placeholder}).query.get_compiler(using)
        sql, params = compiler.as_sql()
        if list(params) != [placeholder]:  # a manager that filters more: not this shortcut
            raise ValueError(f"{model._meta.label}'s default manager adds parameters")
        columns = [expression for expression, _, _ in compiler.select]
        attnames = [expression.target.attname for expression in columns]
        converters = compiler.get_converters(columns)
        found = _compiled[key] = (sql, attnames, converters)
    return found


def _one(model, field: str, value):
    """`model._default_manager.get(<field>=value)`, or None, in one statement compiled once per
    process and database; the row goes through the compiler's converters and `from_db`."""
    using = router.db_for_read(model)
    sql, attnames, converters = _statement(model, using, field)
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, [value])
        row = cursor.fetchone()
    if row is None:
        return None
    if converters:  # as SQLCompiler.apply_converters, with this thread's connection
        row = list(row)
        for position, (functions, expression) in converters.items():
            for function in functions:
                row[position] = function(row[position], expression, connection)
    return model.from_db(using, attnames, row)


def user_by_pk(user_id):
    """The user with this primary key, or None: `User._default_manager.get(pk=user_id)`."""
    model = get_user_model()
    return _one(model, "pk", model._meta.pk.to_python(user_id))


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's, reading the token and then its user each with a statement compiled once, rather
    than compiling `Token.objects.select_related("user").get(key=…)` on every request that
    carries one: 0.34 ms → 0.09 ms of CPU a check (bench/token_auth.py, 2026-12-07, 2-core
    x86_64, SQLite; docs/performance.md). The same answers: an unknown token, or one whose user
    is inactive or gone, is refused with DRF's words."""

    def authenticate_credentials(self, key):
        token = _one(self.get_model(), "key", key)
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user = user_by_pk(token.user_id)
        if user is None or not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        token.user = user
        return user, token


class ModelBackend(backends.ModelBackend):
    def get_user(self, user_id):
        user = user_by_pk(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None


class AuthenticationBackend(allauth_backends.AuthenticationBackend):
    get_user = ModelBackend.get_user


LEGACY_BACKENDS = {
    "django.contrib.auth.backends.ModelBackend": f"{__name__}.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend": f"{__name__}.AuthenticationBackend",
}


def _session_user(request):
    """Django's lazy user, the session's backend path brought up to date first."""
    successor = LEGACY_BACKENDS.get(request.session.get(BACKEND_SESSION_KEY))
    if successor is not None:
        request.session[BACKEND_SESSION_KEY] = successor
    return auth_middleware.get_user(request)


class AuthenticationMiddleware(auth_middleware.AuthenticationMiddleware):
    """Django's, reading a session that names a backend by its former path as naming its
    successor. Still lazy: a request that never asks for its user reads no session."""

    def process_request(self, request):
        super().process_request(request)
        request.user = SimpleLazyObject(lambda: _session_user(request))
