"""Checking a kit's result file on arrival (docs/reproduce.md).

`result_file_check` reads the bytes a contributor uploaded and either returns what the service
stores, or raises a ValidationError on the form's `file` field naming the field and what is wrong:
the size, JSON, unknown or missing fields, the file's own digest, the run and its spec digest, the
unit, the samples' count and values, the environment. Nothing here writes; the service that calls
it (`services.reproduction_file_submit`) stores the file, in one transaction, only when it passes.
"""

import json
import math
import re
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ValidationError

from registry.digests import digest
from registry.models import BenchmarkRun
from registry.reruns.judgement import SAMPLES_LIMIT
from registry.reruns.kit.result import ENVIRONMENT_FIELDS, FIELDS, FORMAT, content_digest
from registry.reruns.reproduce import harness_refusal, run_spec, run_spec_digest
from registry.reruns.services.measured_run import SOFTWARE_KEYS

SAMPLES_MIN = 10  # one batch of the timing loop; memory takes 10 peaks
SAMPLE_BOUNDS = {"ms": 3_600_000.0, "MB": 10_000_000.0}  # an hour a call; 10 TB of memory
# No GPU or CPU call takes under a nanosecond, and no peak is under a byte.
SAMPLE_FLOORS = {"ms": 1e-6, "MB": 1e-6}
FLOOR_NAMES = {"ms": "a nanosecond", "MB": "a byte"}
# Bounds on the document as a whole, checked on the text before it is parsed (json.loads recurses
# once per level, and Python refuses integers of more than 4,300 digits with a ValueError), then on
# every value parsed: the kit writes nothing nested deeper than a few levels, no integer beyond
# RFC 8785's exact range (the spec's digest is taken by rfc8785, which refuses them), and no
# figure beyond 1e15 in any unit.
DEPTH_LIMIT = 16
NUMBER_TEXT_LIMIT = 40
INTEGER_LIMIT = 2**53 - 1
NUMBER_BOUND = 1e15
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_NUMBERS = re.compile(r"[-+0-9.eE]+")
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
    _judgeable(run)
    limit = settings.REPRODUCTION_FILE_MAX_BYTES
    if len(content) > limit:
        _refuse(f"file: {len(content):,} bytes; at most {limit:,} are accepted (REPRODUCTION_FILE_MAX_BYTES)")
    document = _parsed(content)
    _plain(document, "")
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
    _shapes(document, run.unit)
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


def _judgeable(run: BenchmarkRun) -> None:
    """A file is judged against a current run the harness can run: a superseded run's file names
    the run that replaced it, a withdrawn run's says no run replaces it, and a run the harness
    refuses (a CPU memory run, a kernel not mapped) says why."""
    if run.superseded_by_id is not None:
        current = run.superseded_by
        while current.superseded_by_id is not None:
            current = current.superseded_by
        state = "withdrawn too" if current.withdrawn else f"current: {current.get_absolute_url()}"
        _refuse(
            f"run: run {run.pk} is superseded by run {current.pk} (its source published a newer value of "
            f"the same row; run {current.pk} is {state}); reproduce that run instead"
        )
    if run.withdrawn:
        _refuse(
            f"run: run {run.pk} is withdrawn (its source no longer lists it) and no current run replaces it; "
            "no result file is taken for it"
        )
    refusal = harness_refusal(run_spec(run)["job"])
    if refusal:
        _refuse(f"run: the harness cannot run this run ({refusal}), so no file can reproduce it")


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
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        _refuse("file: not UTF-8 text; upload the JSON file the kit wrote")
    _shallow(text)
    try:
        document = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        _refuse(f"file: not a JSON document (line {exc.lineno}, column {exc.colno}: {exc.msg})")
    except ValueError as exc:
        _refuse(f"file: {exc}")
    if not isinstance(document, dict):
        _refuse("file: must be a JSON object, as the kit writes it")
    return document


def _shallow(text: str) -> None:
    """Depth and number length, read from the text with its strings blanked, before parsing."""
    bare = _STRINGS.sub('""', text)
    depth = 0
    for bracket in _BRACKETS.finditer(bare):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > DEPTH_LIMIT:
            _refuse(f"file: nested more than {DEPTH_LIMIT} levels deep; the kit writes no such file")
    for number in _NUMBERS.finditer(bare):
        if len(number.group()) > NUMBER_TEXT_LIMIT:
            _refuse(
                f"file: a number written with {len(number.group()):,} digits; "
                f"at most {NUMBER_TEXT_LIMIT} are accepted"
            )


def _no_constant(name):
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is beyond what a 64-bit float holds")
    return value


def _plain(value, path: str) -> None:
    """Every key and string free of NUL and lone surrogates (PostgreSQL's text and jsonb refuse
    them, and UTF-8 cannot encode a surrogate); every number finite, bounded, and every integer in
    RFC 8785's exact range. The kit writes nothing else."""
    if isinstance(value, dict):
        for key, item in value.items():
            _plain_text(key, f"{path} key" if path else "key")
            _plain(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _plain(item, f"{path}[{index}]")
    elif isinstance(value, str):
        _plain_text(value, path)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int) and abs(value) > INTEGER_LIMIT:
        _refuse(f"{path}: an integer beyond ±(2**53 − 1), the range canonical JSON (RFC 8785) holds exactly")
    elif isinstance(value, float) and not abs(value) <= NUMBER_BOUND:
        _refuse(f"{path}: {value:g} is beyond the bound of {NUMBER_BOUND:g} on any figure")


def _plain_text(value: str, path: str) -> None:
    if "\x00" in value:
        _refuse(f"{path}: contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        _refuse(f"{path}: contains a lone surrogate (\\ud800–\\udfff), which is not text")


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
    floor = SAMPLE_FLOORS.get(run.unit, 0.0)
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
        if value < floor:
            _refuse(
                f"samples[{index}]: {value:g} {run.unit} is under {FLOOR_NAMES[run.unit]} "
                f"({floor:g} {run.unit}), which no call takes"
            )
    return [float(value) for value in samples]


def _shapes(document: dict, unit: str) -> None:
    """The descriptive fields: known keys, plain values, bounded text."""
    _upstream(_object(document, "upstream"), unit)
    environment = _object(document, "environment")
    unknown = sorted(set(environment) - set(ENVIRONMENT_FIELDS))
    if unknown:
        _refuse(f"environment: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    for key, value in environment.items():
        _scalar(f"environment.{key}", value)
    for key, value in _object(document, "sampling").items():
        if key == "blocks" and isinstance(value, list):
            # The harness's independent blocks (harness/timing.py): one object of figures each,
            # with its GPU state's ranges one level further down.
            for index, block in enumerate(value):
                _plain_object(f"sampling.blocks[{index}]", block, depth=2)
        elif isinstance(value, list):
            _numbers(f"sampling.{key}", value)
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


def _upstream(upstream: dict, unit: str) -> None:
    """Upstream's figures are judged against the run's, so they are held to the samples' bounds."""
    if not upstream:
        return
    if set(upstream) != set(UPSTREAM_FIELDS) or not all(_positive(upstream[k]) for k in UPSTREAM_FIELDS):
        _refuse("upstream: must be empty or upstream's median, p20 and p80, each a positive number")
    bound, floor = SAMPLE_BOUNDS.get(unit, math.inf), SAMPLE_FLOORS.get(unit, 0.0)
    for key in UPSTREAM_FIELDS:
        if not floor <= upstream[key] <= bound:
            _refuse(
                f"upstream.{key}: {upstream[key]:g} {unit} is outside the bound of "
                f"{floor:g} to {bound:,.0f} {unit} that any sample is held to"
            )
    if not upstream["p20"] <= upstream["median"] <= upstream["p80"]:
        _refuse("upstream: p20 ≤ median ≤ p80 must hold (they are quantiles of the same calls)")


def _numbers(name: str, value: list) -> None:
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        _refuse(f"{name}: a list of numbers only")


def _plain_object(name: str, value, *, depth: int) -> None:
    """An object of scalars, lists of scalars and, `depth` levels down, such objects."""
    if not isinstance(value, dict):
        _refuse(f"{name}: must be a JSON object")
    for key, item in value.items():
        if isinstance(item, dict) and depth > 0:
            _plain_object(f"{name}.{key}", item, depth=depth - 1)
        elif isinstance(item, list):
            for index, element in enumerate(item):
                _scalar(f"{name}.{key}[{index}]", element)
        else:
            _scalar(f"{name}.{key}", item)


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
