"""Changed rows written back: one parameterised UPDATE per row, sent with executemany (psycopg 3
pipelines it; SQLite runs it as one prepared statement). Django's `bulk_update` builds a CASE
WHEN of a branch per row for each field and resolves every branch as an expression: on a load of
everything that ships, rejudging the shipped reruns spent 6 of its 17 s there (cProfile, 2026-12-07).
`speed_of_light._sol_write` writes its columns the same way with its own few lines: that module's
text is part of every speed-of-light verdict's basis, so it is left as it is."""

from django.db import DEFAULT_DB_ALIAS, connections


def rows_update(objects: list, field_names: list[str], *, using: str = DEFAULT_DB_ALIAS) -> int:
    """Write these fields of these saved instances of one model, each to its own row by primary
    key, in the caller's transaction; returns how many were sent. Values go through each field's
    `get_db_prep_save`, as `save()` and `bulk_update` send them (JSON, dates, foreign keys)."""
    if not objects:
        return 0
    meta = type(objects[0])._meta
    fields = [meta.get_field(name) for name in field_names]
    database = connections[using]
    quote = database.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"
    params = [
        [field.get_db_prep_save(getattr(obj, field.attname), database) for field in fields] + [obj.pk]
        for obj in objects
    ]
    with database.cursor() as cursor:
        cursor.executemany(sql, params)
    return len(params)
