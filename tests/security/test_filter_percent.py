"""A '%' in a bad filter value gets a 400 that names it, never a 500 (schemathesis found it)."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("query", [{"current": "100%"}, {"param": "50%"}, {"withdrawn": "%s%d"}])
def test_percent_in_a_bad_filter_value_is_a_clear_400(client, query):
    response = client.get(reverse("run-list"), query)
    assert response.status_code == 400
    assert "%" in response.content.decode()
