"""An API token checked as every request carrying one is: kernelindex.auth.TokenAuthentication
(the token and its user each read with a statement compiled once) against DRF's own
(`Token.objects.select_related("user").get(key=…)` compiled per request), in one process on one
SQLite database, the two in turn. Writes bench/results/token-auth.json and .md.

    DEBUG=1 .venv/bin/python bench/token_auth.py --rounds 5

The database is a fresh SQLite file under a temporary folder (KERNELINDEX_VAR_DIR) holding one
user and its token; nothing outside that folder is written but the results.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["KERNELINDEX_VAR_DIR"] = tempfile.mkdtemp(prefix="ki-token-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
import django  # noqa: E402

django.setup()
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from rest_framework.authentication import TokenAuthentication as DrfTokenAuthentication  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from bench.common import report  # noqa: E402
from kernelindex.auth import TokenAuthentication  # noqa: E402


def per_check_ms(authentication, key: str, repeat: int) -> float:
    began = time.process_time()
    for _ in range(repeat):
        user, _token = authentication.authenticate_credentials(key)
    assert user.is_active
    return (time.process_time() - began) / repeat * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", "bench@example.org", "a-long-password-42!")
    key = Token.objects.create(user=user).key
    drf, ours = [], []
    for _ in range(args.rounds):
        drf.append(per_check_ms(DrfTokenAuthentication(), key, args.repeat))
        ours.append(per_check_ms(TokenAuthentication(), key, args.repeat))
    report(
        "token-auth",
        f"An API token checked, CPU a check: {args.rounds} rounds of {args.repeat}, the two in turn",
        [
            "DRF's, CPU ms (median)",
            "compiled once, CPU ms (median)",
            "compiled once / DRF's (median of rounds)",
        ],
        [
            {
                "DRF's, CPU ms (median)": statistics.median(drf),
                "compiled once, CPU ms (median)": statistics.median(ours),
                "compiled once / DRF's (median of rounds)": statistics.median(
                    o / d for o, d in zip(ours, drf, strict=True)
                ),
            }
        ],
        rounds=args.rounds,
    )


if __name__ == "__main__":
    main()
