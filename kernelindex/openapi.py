"""The error answers every API operation can give, added to the schema drf-spectacular draws.

DRF answers 403 for missing or bad credentials (session authentication comes first, and it has
no WWW-Authenticate challenge), 404 for an unknown object or a page past the end, 400 for a bad
filter, page or body, and 429 when a throttle or the submission limit refuses; the schema said
only 200, so clients (and schemathesis) could not rely on any of them.
"""

ERROR = {
    "type": "object",
    "description": "`detail` says why; a 400 names each bad field or parameter instead.",
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}
RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}
}
# Every text input refuses NUL bytes with a 400 (DRF's CharField, the filters): PostgreSQL
# cannot store them. Saying so keeps a NUL-carrying request out of "valid" input.
NO_NUL = "^[^\\x00]*$"
DESCRIPTIONS = {
    "400": "A parameter or the body is invalid.",
    "403": "Credentials missing, invalid or revoked, or not allowed to do this.",
    "404": "No such object, or no such page.",
    "415": "The body is in a media type the operation does not take.",
    "429": "Too many requests; see Retry-After.",
}


def error_responses(result, generator, request, public):
    """drf-spectacular postprocessing hook: document 400/403/404/(415)/429 on every operation, and
    what the inputs really accept."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR
    reference = {"$ref": "#/components/schemas/Error"}
    for item in result.get("paths", {}).values():
        for operation in item.values():
            _inputs_describe(operation, schemas)
            takes_input = bool(operation.get("parameters") or operation.get("requestBody"))
            for code, description in DESCRIPTIONS.items():
                if code == "400" and not takes_input:
                    continue
                if code == "415" and "requestBody" not in operation:
                    continue
                response = {
                    "description": description,
                    "content": {"application/json": {"schema": reference}},
                }
                if code == "429":
                    response["headers"] = RETRY_AFTER
                operation.setdefault("responses", {}).setdefault(code, response)
    return result


def _inputs_describe(operation: dict, schemas: dict) -> None:
    """An empty query parameter means "no filter" or "the default" (what an HTML GET form sends
    for a field left blank), which a number, a date or a choice must say; a free text already
    admits "". No text input takes a NUL byte."""
    for parameter in operation.get("parameters", []):
        if parameter.get("in") != "query":
            continue
        schema = parameter.get("schema", {})
        free_text = schema.get("type") == "string" and not ({"enum", "format"} & schema.keys())
        if not parameter.get("required") and not free_text:
            parameter["allowEmptyValue"] = True
        _no_nul(schema)
    for content in operation.get("requestBody", {}).get("content", {}).values():
        ref = content.get("schema", {}).get("$ref", "")
        component = schemas.get(ref.rpartition("/")[2], {})
        for prop in component.get("properties", {}).values():
            _no_nul(prop)
            _no_nul(prop.get("items", {}))


def _no_nul(schema: dict) -> None:
    if schema.get("type") == "string" and not ({"enum", "format", "pattern"} & schema.keys()):
        schema["pattern"] = NO_NUL
