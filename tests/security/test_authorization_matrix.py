"""Every URL route and API operation, as every role, answers what tests/security/authz_matrix.py
says; a route or operation missing from the table fails too."""

import re

import pytest
from django.urls import resolve
from drf_spectacular.generators import SchemaGenerator

from tests.security.authz_matrix import MATRIX, ROWS
from tests.security.routes import all_routes, fill, methods_for, observe, path_values

pytestmark = pytest.mark.django_db


class TestTheTableCoversEveryRoute:
    def test_every_route_of_the_resolver_has_a_row(self):
        missing = [route for route in all_routes() if route not in MATRIX]
        assert not missing, "Routes missing from tests/security/authz_matrix.py:\n" + "\n".join(missing)

    def test_no_row_names_a_route_that_is_gone(self):
        routes = set(all_routes())
        assert [row.route for row in ROWS if row.route not in routes] == []

    def test_every_row_lists_the_methods_of_its_kind_with_six_codes(self):
        for row in ROWS:
            assert tuple(row.codes()) == methods_for(row.route), row.route
            for codes in row.codes().values():
                assert re.fullmatch(r"\d{3}( \d{3}){5}", codes), (row.route, codes)

    def test_each_rows_path_reaches_its_route(self, world):
        values = path_values(world)
        wrong = []
        for row in ROWS:
            path = fill(row.path if row.path is not None else row.route, values)
            if resolve(path).route != row.route:
                wrong.append(f"{row.route}: {path} resolves to {resolve(path).route}")
        assert wrong == []

    def test_every_api_operation_of_the_schema_is_a_row_with_its_method(self, world):
        schema = SchemaGenerator().get_schema(request=None, public=True)
        values = {
            "id": world.run.pk,
            "run_pk": world.run.pk,
            "slug": world.run.kernel.slug,
            "digest": world.run.digest,
            "comparison_key": world.run.comparison_key,
        }
        operations = 0
        for path, item in schema["paths"].items():
            route = resolve(re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), path)).route
            for method in item:
                operations += 1
                assert route in MATRIX, f"{method.upper()} {path}"
                assert method.upper() in MATRIX[route].codes(), f"{method.upper()} {path}"
        assert operations >= 25


class TestEveryRoleGetsWhatTheTableSays:
    def test_every_route_every_method_every_role(self, world):
        values = path_values(world)
        clients = {}
        mismatches = []
        for row in ROWS:
            observed = observe(world, row.route, row.path or row.route, values, clients)
            for method, expected in row.codes().items():
                if observed[method] != expected:
                    mismatches.append(f"{method} {row.route}: expected {expected}, got {observed[method]}")
        assert not mismatches, "\n".join(mismatches)
