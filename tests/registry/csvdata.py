"""Small Liger-format CSV files for importer tests, cut from the bundled file."""

import csv
import io

from registry.sources.liger.importer import COLUMNS
from registry.sources.liger.services import BUNDLED_LIGER_CSV


def bundled_rows(kernel: str = "geglu", gpu: str = "NVIDIA A100-SXM4-80GB") -> list[dict]:
    with BUNDLED_LIGER_CSV.open(newline="", encoding="utf-8") as handle:
        return [r for r in csv.DictReader(handle) if r["kernel_name"] == kernel and r["gpu_name"] == gpu]


def write_csv(path, rows: list[dict], columns: list[str] = COLUMNS) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return str(path)
