"""The API's JSON parser, refusing input nested too deep to decode with a 400."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class BoundedJSONParser(JSONParser):
    """Python's decoder recurses once per nesting level: a body of 100,000 `[` raises
    RecursionError, which DRF's parser (it catches ValueError) lets through as a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
