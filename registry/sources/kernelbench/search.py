"""Finding KernelBench problems by their number: "L1 #19", "level 1 19", "#19", "19_ReLU.py"."""

import re

from django.db.models import Q

PATTERN = re.compile(
    r"^\s*(?:kernelbench\s*)?(?:l(?:evel)?\s*(?P<level>\d)\s*[/#:_\s-]*)?#?\s*(?P<number>\d{1,4})"
    r"(?:_(?P<name>[A-Za-z0-9_]+?))?(?:\.py)?\s*$",
    re.IGNORECASE,
)


def kernels_matching(query: str) -> Q | None:
    match = PATTERN.match(query)
    if not match:
        return None
    number = int(match["number"])
    if match["level"]:
        found = Q(slug__startswith=f"kernelbench-l{match['level']}-{number}-")
    else:
        found = Q(slug__regex=rf"^kernelbench-l[0-9]+-{number}-")
    if match["name"]:
        found &= Q(description__icontains=f"{number}_{match['name']}")
    return found
