"""Checking a kit's result file on arrival (docs/reproduce.md).

`result_file_check` reads the bytes a contributor uploaded and either returns what the service
stores, or raises a ValidationError on the form's `file` field naming the field and what is wrong:
the size, JSON, unknown or missing fields, the file's own digest, the run and its spec digest, the
unit, the samples' count and values, the environment. Nothing here writes; the service that calls
it (`services.reproduction_file_submit`) stores the file, in one transaction, only when it passes.
"""

import json
import math
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ValidationError

from registry.digests import digest
from registry.models import BenchmarkRun
from registry.reruns.judgement import SAMPLES_LIMIT
from registry.reruns.kit.result import ENVIRONMENT_FIELDS, FIELDS, FORMAT, content_digest
from registry.reruns.reproduce import run_spec_digest
from registry.reruns.services.measured_run import SOFTWARE_KEYS

SAMPLES_MIN = 10  # one batch of the timing loop; memory takes 10 peaks
SAMPLE_BOUNDS = {"ms": 3_600_000.0, "MB": 10_000_000.0}  # an hour a call; 10 TB of memory
TEXT_LIMIT = 200
DEVICES = ("cpu", "cuda")
UPSTREAM_FIELDS = ("median", "p20", "p80")


@dataclass
class CheckedFile:
    document: dict
    samples: list[float]
    comparable: bool  # timed on the run's own GPU model (or a CPU run on a CPU)
    checks: list[dict] = field(default_factory=list)

    @property
    def stored(self) -> dict:
        """The file as kept on the reproduction: everything but its samples (stored beside it)."""
        return {key: value for key, value in self.document.items() if key != "samples"}


def result_file_check(*, run: BenchmarkRun, content: bytes) -> CheckedFile:
    """The checked file, or ValidationError({"file": ["<field>: <what is wrong>"]})."""
    limit = settings.REPRODUCTION_FILE_MAX_BYTES
    if len(content) > limit:
        _refuse(f"file: {len(content):,} bytes; at most {limit:,} are accepted (REPRODUCTION_FILE_MAX_BYTES)")
    document = _parsed(content)
    _fields(document)
    if document["format"] != FORMAT:
        _refuse(f"format: {document['format']!r} is not {FORMAT!r}, the format this site reads")
    stated, computed = document["digest"], content_digest(document)
    if stated != computed:
        _refuse(
            f"digest: the file's content hashes to {computed}, but the file says {stated}: "
            "it was changed after the kit wrote it"
        )
    checks = [_passed("digest", f"the content hashes to {computed}, as the file says")]
    checks += _spec_checks(run, document)
    samples = _samples(run, document)
    checks.append(_passed("samples", f"{len(samples)} samples in {run.unit}, each positive and finite"))
    _shapes(document)
    environment = document["environment"]
    comparable = environment.get("gpu_slug") == run.environment.slug and (
        (document["device"] == "cpu") == (run.environment.slug == "cpu")
    )
    checks.append(
        {
            "check": "GPU model",
            "passed": comparable,
            "detail": f"timed on {environment.get('gpu_name') or 'an unnamed device'} ({document['device']}); "
            f"the run on {run.environment.product}"
            + ("" if comparable else ": not the same model, so no verdict is given"),
        }
    )
    return CheckedFile(document=document, samples=samples, comparable=comparable, checks=checks)


def environment_rows(run: BenchmarkRun, environment: dict) -> list[tuple[str, str, str]]:
    """(what, the run's, the contributor's), field by field, as the compare page sets two runs side by side."""
    software = run.environment.software or {}
    rows = [
        ("GPU", run.environment.product, environment.get("gpu_name")),
        (
            "Architecture / compute capability",
            run.environment.architecture,
            environment.get("compute_capability"),
        ),
        *((key.replace("_", "-"), software.get(key), environment.get(key)) for key in SOFTWARE_KEYS),
        ("CPU", "", environment.get("cpu")),
        ("CPU threads", "", environment.get("cpu_threads")),
    ]
    return [
        (name, str(ours or "not recorded"), str(theirs if theirs not in (None, "") else "not recorded"))
        for name, ours, theirs in rows
    ]


def _parsed(content: bytes) -> dict:
    def no_constant(name):
        raise ValueError(f"{name} is not a number JSON allows")

    try:
        document = json.loads(content.decode("utf-8"), parse_constant=no_constant)
    except UnicodeDecodeError:
        _refuse("file: not UTF-8 text; upload the JSON file the kit wrote")
    except json.JSONDecodeError as exc:
        _refuse(f"file: not a JSON document (line {exc.lineno}, column {exc.colno}: {exc.msg})")
    except ValueError as exc:
        _refuse(f"file: {exc}")
    if not isinstance(document, dict):
        _refuse("file: must be a JSON object, as the kit writes it")
    return document


def _fields(document: dict) -> None:
    unknown = sorted(set(document) - set(FIELDS))
    if unknown:
        _refuse(
            f"{', '.join(unknown)}: unknown field{'s' if len(unknown) > 1 else ''}; a result file has only {', '.join(FIELDS)}"
        )
    missing = [name for name in FIELDS if name not in document]
    if missing:
        _refuse(f"{', '.join(missing)}: missing; a result file has all of {', '.join(FIELDS)}")


def _spec_checks(run: BenchmarkRun, document: dict) -> list[dict]:
    about = document["run"]
    if not isinstance(about, dict) or set(about) != {"id", "url"}:
        _refuse("run: must be an object of the run's id and url")
    if about["id"] != run.pk:
        _refuse(
            f"run: this file reproduces run {about['id']!r}, not run {run.pk}; upload it on that run's page"
        )
    expected = run_spec_digest(run)
    if document["specDigest"] != expected:
        _refuse(
            f"specDigest: the file ran spec {document['specDigest']}, this run's is {expected} "
            "(its workload, implementation, pass, metric or timing settings differ): fetch the spec again"
        )
    if not isinstance(document["spec"], dict) or digest(document["spec"]) != expected:
        _refuse("spec: the spec in the file does not hash to its specDigest")
    if document["device"] not in DEVICES:
        _refuse(f"device: must be one of {', '.join(DEVICES)}, not {document['device']!r}")
    if document["unit"] != run.unit:
        _refuse(f"unit: the file measured {document['unit']!r}; this run records {run.unit!r}")
    return [
        _passed("run", f"run {run.pk}"),
        _passed(
            "specDigest", f"{expected}, this run's spec: the same workload, pass, metric and timing settings"
        ),
    ]


def _samples(run: BenchmarkRun, document: dict) -> list[float]:
    samples = document["samples"]
    if not isinstance(samples, list):
        _refuse("samples: must be a list of numbers")
    if not SAMPLES_MIN <= len(samples) <= SAMPLES_LIMIT:
        _refuse(f"samples: {len(samples)} samples; between {SAMPLES_MIN} and {SAMPLES_LIMIT:,} are accepted")
    bound = SAMPLE_BOUNDS[run.unit] if run.unit in SAMPLE_BOUNDS else math.inf
    for index, value in enumerate(samples):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            _refuse(f"samples[{index}]: {value!r} is not a positive finite number")
        if value > bound:
            _refuse(f"samples[{index}]: {value:g} {run.unit} is above the bound of {bound:,.0f} {run.unit}")
    return [float(value) for value in samples]


def _shapes(document: dict) -> None:
    """The descriptive fields: known keys, plain values, bounded text."""
    upstream = _object(document, "upstream")
    if upstream and (
        set(upstream) != set(UPSTREAM_FIELDS) or not all(_positive(upstream[k]) for k in UPSTREAM_FIELDS)
    ):
        _refuse("upstream: must be empty or upstream's median, p20 and p80, each a positive number")
    environment = _object(document, "environment")
    unknown = sorted(set(environment) - set(ENVIRONMENT_FIELDS))
    if unknown:
        _refuse(f"environment: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    for key, value in environment.items():
        _scalar(f"environment.{key}", value)
    for key, value in _object(document, "sampling").items():
        if isinstance(value, list):
            if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
                _refuse(f"sampling.{key}: a list of numbers only")
        elif not isinstance(value, dict):
            _scalar(f"sampling.{key}", value)
    _object(document, "gpuState")
    kit = _object(document, "kit")
    if set(kit) != {"version", "harness", "protocol"}:
        _refuse("kit: must be the kit's version, harness and protocol")
    for key in ("version", "harness", "protocol"):
        _text(f"kit.{key}", kit[key])
    for key in ("gpuUuid", "startedAt", "finishedAt"):
        _text(key, document[key], empty=key == "gpuUuid")


def _object(document: dict, key: str) -> dict:
    if not isinstance(document[key], dict):
        _refuse(f"{key}: must be a JSON object")
    return document[key]


def _scalar(name: str, value) -> None:
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float) and math.isfinite(value):
        return
    if isinstance(value, str) and len(value) <= TEXT_LIMIT:
        return
    _refuse(f"{name}: must be a number, a boolean, null or text of at most {TEXT_LIMIT} characters")


def _text(name: str, value, *, empty: bool = False) -> None:
    if not isinstance(value, str) or len(value) > TEXT_LIMIT or (not value and not empty):
        _refuse(f"{name}: must be text of 1 to {TEXT_LIMIT} characters")


def _positive(value) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


def _passed(check: str, detail: str) -> dict:
    return {"check": check, "passed": True, "detail": detail}


def _refuse(reason: str):
    raise ValidationError({"file": [reason]})
