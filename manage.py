#!/usr/bin/env python
import os
import sys
from pathlib import Path

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelindex.settings")
    try:
        import environ  # noqa: F401 (the settings need it; checked here to say where it lives)
        from django.core.management import execute_from_command_line
    except ModuleNotFoundError as exc:
        venv = Path(__file__).resolve().parent / ".venv" / "bin" / "python"
        hint = (
            f"run it with the project's virtual environment: {os.path.relpath(venv)} manage.py ..."
            if venv.exists()
            else "create the project's virtual environment first: python3 scripts/dev.py run"
        )
        sys.exit(f"{exc.name} is not installed for {sys.executable}; {hint}")
    execute_from_command_line(sys.argv)
