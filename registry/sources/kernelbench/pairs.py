"""KernelBench's shipped GPU sweep files (data/gpu/*.jsonl.gz) as verdict_model.Pair rows, as the
registry records them: the first line of a problem and implementation on a GPU model is its
measurement, every later line a rerun of it (measurements.gpu_sweep_record). What a GPU model's
verdict model is fitted on where only KernelBench's runs were measured on it (the H100s: no Liger
run was). Reads the files with the standard library and the importer's names; no database.
"""

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from django.utils.text import slugify

from registry.sources.kernelbench import programs
from registry.sources.kernelbench.gpu_sweep import GPU_DIR, output_lines
from registry.sources.kernelbench.importer import METRIC, OPERATION_MODE, kernel_of
from registry.stats import intervals, verdict_model


@dataclass(frozen=True)
class Line:
    """One measured line of a sweep file: what the pair of it reads."""

    gpu: str  # the GPU model's slug, as the recorder names the environment
    gpu_name: str  # the GPU model as the harness read it ("NVIDIA H100 80GB HBM3")
    kernel: str
    target: tuple[str, str]  # (problem file digest, implementation)
    card: str
    median: float
    samples: tuple
    sampling: dict
    gpu_state: dict
    environment: dict

    @property
    def job(self) -> dict:
        """The line as verdict_model.pair_class reads a job."""
        return {
            "sampling": self.sampling,
            "samples": self.samples,
            "gpu_state": self.gpu_state,
            "environment": self.environment,
        }

    @property
    def estimate(self) -> intervals.MedianEstimate:
        return intervals.median_estimate(self.samples, block_ids=self.sampling.get("sample_blocks"))


def lines(folder: Path = GPU_DIR):
    """Every line with a result of the folder's sweep files, in the order the registry records
    them (file name, then line). A file is decoded once while it stays as it was (its size and
    modification time): fitting a model, naming its card and the checks read them again."""
    for path in sorted(Path(folder).glob("*.jsonl.gz")):
        stat = path.stat()
        yield from _file_lines(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _file_lines(path: str, mtime_ns: int, size: int) -> tuple[Line, ...]:
    name_of_file = Path(path).name
    out = []
    for text in output_lines(Path(path)):
        entry = programs.annotate(name_of_file, json.loads(text)) if text.strip() else {}
        result = entry.get("result")
        if not result:
            continue
        name = result["environment"].get("gpu_name") or ""
        out.append(
            Line(
                gpu=slugify(name),
                gpu_name=name,
                kernel=kernel_of(entry["level"], entry["problem"])["slug"],
                target=(entry["sha256"], entry["implementation"]),
                card=str(result.get("gpu_uuid") or ""),
                median=float(result["median"]),
                samples=tuple(result["samples"]),
                sampling=result.get("sampling") or {},
                gpu_state=result.get("gpu_state") or {},
                environment=result["environment"],
            )
        )
    return tuple(out)


def gpu_name(gpu: str, folder: Path = GPU_DIR) -> str:
    """The GPU model of slug `gpu` as a visitor says it ("H100 80GB HBM3"), from its sweeps."""
    for line in lines(folder):
        if line.gpu == gpu:
            return line.gpu_name.removeprefix("NVIDIA ").strip()
    raise LookupError(f"no sweep file measured on {gpu}")


def pairs(gpu: str, folder: Path = GPU_DIR) -> list[verdict_model.Pair]:
    """Every rerun of a KernelBench problem measured on the GPU model `gpu` (a slug), against its
    measurement: the class each falls in (verdict_model.class_key, as the registry's judgement
    puts it), its two median estimates and cards."""
    measured: dict[tuple, Line] = {}
    out = []
    for line in lines(folder):
        if line.gpu != gpu or len(line.samples) < 4:
            continue
        measure = measured.setdefault(line.target, line)
        if measure is line:
            continue
        out.append(
            verdict_model.Pair(
                kernel=line.kernel,
                workload="/".join((line.kernel, *line.target, OPERATION_MODE)),
                key=_class(measure, line),
                same_card=bool(measure.card) and measure.card == line.card,
                new=line.estimate,
                old=measure.estimate,
                cards=(measure.card, line.card),
            )
        )
    return out


def _class(measure: Line, rerun: Line) -> str:
    key, _ = verdict_model.pair_class(
        kernel=measure.kernel,
        provider=measure.target[1],
        mode=OPERATION_MODE,
        metric=METRIC,
        median_ms=measure.median,
        jobs=[measure.job, rerun.job],
    )
    return key
