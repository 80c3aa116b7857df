"""The API's one pagination: every list answers a bad page number alike."""

from rest_framework import exceptions
from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """A page number that is not one, or past the last page, is a 400 naming `page`, as every
    other bad query parameter is (DRF's own answers 404 for both, which reads as "no such list")."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_number(self, request, paginator):
        number = request.query_params.get(self.page_query_param) or 1
        if number != "last" and (not _whole_number(str(number)) or len(str(number)) > 9):
            raise exceptions.ValidationError({"page": [f"{str(number)[:40]!r} is not a page number."]})
        return number

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw and (not _whole_number(raw) or not 1 <= int(raw[:9]) <= self.max_page_size):
            raise exceptions.ValidationError(
                {"page_size": [f"page_size must be a whole number from 1 to {self.max_page_size}."]}
            )
        return super().get_page_size(request)

    def paginate_queryset(self, queryset, request, view=None):
        try:
            return super().paginate_queryset(queryset, request, view)
        except exceptions.NotFound as exc:
            raise exceptions.ValidationError({"page": [str(exc.detail)]}) from None

    def get_schema_operation_parameters(self, view):
        """The bounds the two methods above enforce, so the schema promises only what works."""
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
            elif parameter["name"] == self.page_query_param:
                parameter["schema"].update(minimum=1, maximum=999_999_999)
        return parameters


def _whole_number(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes "²", which int() refuses (schemathesis)."""
    return text.isascii() and text.isdigit()
