"""Read the Liger-Kernel benchmark CSV into validated, content-addressed run records.

Parsing touches no database: it either returns every row as a `LigerRow`, or raises
`LigerFormatError` naming the first bad line and column, so the caller writes all or nothing.
"""

import csv
import hashlib
import io
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache

from django.utils.text import slugify

from registry import digests
from registry.sources.liger import catalog

COLUMNS = [
    "kernel_name",
    "kernel_provider",
    "kernel_operation_mode",
    "metric_name",
    "metric_unit",
    "x_name",
    "x_label",
    "x_value",
    "y_value_50",
    "y_value_20",
    "y_value_80",
    "extra_benchmark_config_str",
    "gpu_name",
    "timestamp",
    "liger_version",
]
METRICS = {"speed": ("latency", "ms"), "memory": ("memory", "MB")}
MODES = {"forward", "backward", "full", "no-grad-forward"}
MAIN_FILE = "all_benchmark_data.csv"
# A release's version as upstream writes it (0.2.1, 0.5.10; a PEP 440 suffix allowed): a row cut
# short in its last field ("0.") is no version.
LIGER_VERSION = re.compile(r"^\d+(\.\d+)+((a|b|rc|\.post|\.dev)\d+)*(\+[A-Za-z0-9.]+)?$", re.ASCII)
VARIANT_FILE = re.compile(r"^all_benchmark_data_(?P<variant>[a-z0-9]+)\.csv$")
MAX_SAFE_INTEGER = 2**53 - 1
SOURCE = {
    "slug": "liger-kernel",
    "name": "Liger-Kernel benchmarks",
    "url": catalog.LIGER_REPOSITORY,
    "license": "BSD-2-Clause",
    "license_url": "https://github.com/linkedin/Liger-Kernel/blob/main/LICENSE",
    "description": "Benchmark results published with the Liger-Kernel project "
    "(benchmark/data/all_benchmark_data.csv in its source distribution).",
}
COMPARABILITY_NOTE = (
    "Only comparable within one kernel, workload, timed pass and GPU: the harness and its "
    "settings are the same for every provider, but nothing else is held fixed."
)
PROTOCOLS = {
    "latency": {
        "name": "Liger-Kernel speed benchmark",
        "harness": "Liger-Kernel benchmark scripts",
        "harnessRepository": catalog.LIGER_REPOSITORY,
        "timer": "CUDA events (triton.testing.do_bench)",
        "statistic": "median",
        "quantiles": [0.5, 0.2, 0.8],
        "warmupMs": 25,
        "repMs": 10,
        "comparabilityFamily": "liger-benchmark/do-bench-cuda-events",
        "notes": "forward times layer(x); backward runs the forward once, then times "
        "y.backward(do, retain_graph=True); full times forward plus backward. rep is a time "
        "budget of 10 ms, so an op slower than about 10 ms is timed once (p20 = p50 = p80). "
        + COMPARABILITY_NOTE,
    },
    "memory": {
        "name": "Liger-Kernel memory benchmark",
        "harness": "Liger-Kernel benchmark scripts",
        "harnessRepository": catalog.LIGER_REPOSITORY,
        "timer": "torch.cuda.max_memory_allocated",
        "statistic": "median",
        "quantiles": [0.5, 0.2, 0.8],
        "comparabilityFamily": "liger-benchmark/peak-memory",
        "notes": "Peak max_memory_allocated() over 10 runs, in MiB (labelled MB by the source). "
        + COMPARABILITY_NOTE,
    },
}


class LigerFormatError(ValueError):
    """`column` is a column's name, or a 1-based position (a character of the line, or a field
    beyond the header) where there is no name."""

    def __init__(self, message: str, *, line: int | None = None, column: str | int | None = None):
        self.line, self.column = line, column
        where = []
        if line is not None:
            where.append(f"line {line}")
        if column:
            where.append(f"column {column!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


@dataclass(frozen=True)
class KnownRow:
    """A row whose key (`row_key`) matches a run already in the registry: parsing it again would
    give that run's manifest and digest, so it is not parsed again."""

    line: int
    external_id: str


@dataclass
class LigerRow:
    line: int
    kernel: dict
    implementation: dict
    workload: dict
    protocol: dict
    environment: dict
    run: dict
    # The manifest's canonical JSON where it is also json.dumps's text (nearly always): the
    # importer stores it as it is instead of serialising the manifest again.
    manifest_json: str | None = None
    # Until the manifest is made (parse_file(manifests=False)): the file's cache of what rows
    # share, which holds the spec documents' canonical bytes.
    shared: dict | None = field(default=None, repr=False, compare=False)

    def manifest_make(self) -> None:
        """Add the run's manifest and digest (`run["manifest"]`, `run["digest"]`) and
        `manifest_json`, where the parse left them to be made; nothing if it did not. Only the
        run's own row needs them, or a row whose run is already published (to compare digests):
        an import makes a new run's as it writes the row, while the database takes the rows
        before it."""
        if self.shared is None:
            return
        specs, self.shared = self.shared, None
        manifest = digests.run_manifest(
            run=self.run,
            kernel=self.kernel["slug"],
            source=SOURCE,
            results=digests.median_results(self.run),
            implementation=(self.implementation["spec"], self.implementation["digest"]),
            workload=(self.workload["spec"], self.workload["digest"]),
            protocol=(self.protocol["spec"], self.protocol["digest"]),
            environment=(self.environment["spec"], self.environment["digest"], self.environment["slug"]),
        )
        canonical, plain = _manifest_canonical(manifest, specs, _template_key(self))
        self.run["manifest"] = manifest
        self.run["digest"] = "sha256:" + hashlib.sha256(canonical).hexdigest()
        self.manifest_json = canonical.decode("utf-8") if plain else None


def variant_of(filename: str) -> str:
    """The benchmark suite a data file belongs to: "" for all_benchmark_data.csv (and any other
    name), "cutile" for all_benchmark_data_cutile.csv. Each suite lists its own rows, with its own
    provider names; a row absent from one suite's file is not gone from another's."""
    match = VARIANT_FILE.match(filename)
    return match["variant"] if match else ""


def parse_file(
    data: bytes,
    *,
    variant: str = "",
    known: dict | None = None,
    final_newline: bool = True,
    manifests: bool = True,
) -> list:
    """Every data row as a `LigerRow`, or as a `KnownRow` where its `row_key` is in `known`
    (a mapping of row keys to the external ids of runs already imported). `final_newline`: a
    last line without one is refused, since a file cut short in transit looks so; a version
    read from the repository's history is whole as git stores it (upstream committed #815
    without a final newline), so there the rows' own checks decide. `manifests=False` leaves
    each row's manifest and digest to `LigerRow.manifest_make` (nothing in them is checked)."""
    text = _decode(data)
    if final_newline and text and not text.endswith(("\n", "\r")):
        raise LigerFormatError(
            "the last line ends without a newline, so the file may be cut short; "
            "fetch it again (every row of a data file ends with a newline)",
            line=text.count("\n") + 1,
        )
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None or not any(cell.strip() for cell in header):
        raise LigerFormatError("the file is empty; expected a header line", line=1)
    missing = [name for name in COLUMNS if name not in header]
    if missing:
        raise LigerFormatError(f"missing column(s): {', '.join(missing)}", line=1)
    index = {name: header.index(name) for name in COLUMNS}
    rows, seen, specs = [], {}, {}
    for cells in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            # The first field the header has no name for, or the first one the row lacks.
            raise LigerFormatError(
                f"expected {len(header)} fields, found {len(cells)}",
                line=line,
                column=min(len(cells), len(header)) + 1,
            )
        raw = {name: cells[i] for name, i in index.items()}
        external_id = known.get(row_key(raw, variant)) if known else None
        row = KnownRow(line, external_id) if external_id else _parse_row(line, raw, variant, specs, manifests)
        external_id = row.external_id if external_id else row.run["external_id"]
        if external_id in seen:
            raise LigerFormatError(
                f"duplicate row: same key as line {seen[external_id]} ({external_id})", line=line
            )
        seen[external_id] = line
        rows.append(row)
    if not rows:
        raise LigerFormatError("the file has a header but no data rows", line=2)
    return rows


# --- the re-import key -----------------------------------------------------------------------------
# A run is a function of its row's cells: the eight the upstream key hashes (raw), the unit, sweep
# label, timestamp and version (stripped) and the three values (as floats). `row_key` reads these
# from the CSV row, `run_key` from the stored run; where they are equal the row parses to exactly
# that run again (same manifest, same digest), so an unchanged row costs one sha256 of a short
# list instead of a manifest and three canonical-JSON digests. A row that differs in any way, even
# in whitespace or in how it writes a number, is parsed in full, as before.
UPSTREAM_KEY_COLUMNS = (
    "kernel_name",
    "kernel_provider",
    "kernel_operation_mode",
    "metric_name",
    "x_name",
    "x_value",
    "extra_benchmark_config_str",
    "gpu_name",
)
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"


def upstream_key(raw: dict, variant: str) -> str:
    return digests.digest_of_strings([raw[c] for c in UPSTREAM_KEY_COLUMNS] + ([variant] if variant else []))


def row_key(raw: dict, variant: str) -> tuple | None:
    try:
        values = tuple(repr(float(raw[c])) for c in ("y_value_50", "y_value_20", "y_value_80"))
    except ValueError:
        return None  # not a number: the full parse names the column
    return (
        upstream_key(raw, variant),
        raw["metric_unit"].strip(),
        raw["x_label"].strip(),
        *values,
        raw["timestamp"].strip(),
        raw["liger_version"].strip(),
    )


def run_key(*, upstream_key, unit, x_label, median, p20, p80, observed_at, liger_version) -> tuple:
    """`row_key` of the row a stored run was imported from (observed_at in UTC)."""
    return (
        upstream_key,
        unit,
        x_label,
        repr(median),
        repr(p20),
        repr(p80),
        observed_at.astimezone(UTC).strftime(TIMESTAMP_FORMAT),
        liger_version,
    )


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        before = data[line_start : exc.start].decode("utf-8", errors="replace")
        raise LigerFormatError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            line=data.count(b"\n", 0, exc.start) + 1,
            column=len(before) + 1,
        ) from None
    if "\x00" in text:
        # No database text column can hold it, and no real CSV has one.
        offset = text.index("\x00")
        raise LigerFormatError(
            f"a NUL character at offset {offset}; this is not a text CSV",
            line=text.count("\n", 0, offset) + 1,
            column=offset - (text.rfind("\n", 0, offset) + 1) + 1,
        )
    return text


def _number(value: str, line: int, column: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise LigerFormatError(f"{value!r} is not a number", line=line, column=column) from None
    if not math.isfinite(number) or number < 0:
        raise LigerFormatError(f"{value!r} is not a finite, non-negative number", line=line, column=column)
    return number


def _required(raw: dict, name: str, line: int) -> str:
    value = raw[name].strip()
    if not value:
        raise LigerFormatError("empty value", line=line, column=name)
    return value


def _measured_columns(raw: dict, line: int) -> tuple[str, str, str, tuple[float, float, float]]:
    """The timed pass, the metric and its unit, and (p20, median, p80), checked in column order."""
    mode = _required(raw, "kernel_operation_mode", line)
    if mode not in MODES:
        raise LigerFormatError(
            f"{mode!r} is not one of {', '.join(sorted(MODES))}", line=line, column="kernel_operation_mode"
        )
    metric_name = _required(raw, "metric_name", line)
    if metric_name not in METRICS:
        raise LigerFormatError(
            f"{metric_name!r} is not one of speed, memory", line=line, column="metric_name"
        )
    metric, unit = METRICS[metric_name]
    if raw["metric_unit"].strip() != unit:
        raise LigerFormatError(
            f"unit {raw['metric_unit']!r} does not match metric {metric_name!r} (expected {unit!r})",
            line=line,
            column="metric_unit",
        )
    y50, y20, y80 = (_number(raw[c], line, c) for c in ("y_value_50", "y_value_20", "y_value_80"))
    if not y20 <= y50 <= y80:  # the database refuses such a run too (run_quantiles_ordered)
        raise LigerFormatError(
            f"quantiles out of order: y_value_20 {y20:g}, y_value_50 {y50:g}, y_value_80 {y80:g} "
            "(p20 <= median <= p80)",
            line=line,
            column="y_value_50",
        )
    return mode, metric, unit, (y20, y50, y80)


def _external_id(kernel, mode, metric, provider, environment, workload, observed_at) -> str:
    """The run's id as the source's row names it: kernel, pass, provider, GPU, workload, time."""
    pass_segment = mode if metric == "latency" else f"{mode}-{metric}"
    return "/".join(
        [
            kernel,
            pass_segment,
            provider,
            environment["slug"],
            workload["slug"],
            observed_at.strftime("%Y-%m-%d-%H-%M-%S"),
        ]
    )


def _run_fields(raw, variant, liger_version, mode, metric, unit, quantiles, observed_at) -> dict:
    """The run's own fields from its row (all but its external id and comparison key)."""
    y20, y50, y80 = quantiles
    upstream = upstream_key(raw, variant)
    # The release a run came from is on its first import, not in its manifest: a later release
    # lists the same row again, and the same row must keep the same digest.
    labels = {"liger_version": liger_version}
    if variant:
        labels["variant"] = variant
    source_metrics = {f"{unit}_20": y20, f"{unit}_50": y50, f"{unit}_80": y80}
    return {
        "operation_mode": mode,
        "metric": metric,
        "unit": unit,
        "median": y50,
        "p20": y20,
        "p80": y80,
        "source_metrics": source_metrics,
        "observed_at": observed_at,
        "source_status": "passed",
        "correctness_note": "Passed, as asserted by the source; its correctness policy was not published.",
        "upstream_key": upstream,
        "labels": labels,
    }


def _parse_row(
    line: int, raw: dict, variant: str, specs: dict | None = None, manifest: bool = True
) -> LigerRow:
    """One row, validated. `specs` is the file's cache of what many rows share (the spec
    documents, their digests and database rows, comparison keys), so each distinct one is built
    and hashed once per file; the row is checked column by column, in the same order, either way.
    `manifest=False`: its manifest and digest are left to `LigerRow.manifest_make`."""
    specs = {} if specs is None else specs
    kernel = _required(raw, "kernel_name", line)
    provider = _required(raw, "kernel_provider", line)
    mode, metric, unit, (y20, y50, y80) = _measured_columns(raw, line)
    gpu_name = _required(raw, "gpu_name", line)
    observed_at = _timestamp(_required(raw, "timestamp", line), line)
    x_name = _required(raw, "x_name", line)
    x_raw = _required(raw, "x_value", line)
    config_text = raw["extra_benchmark_config_str"]
    config, dtype = _cached(specs, ("config", config_text), lambda: _config_and_dtype(config_text, line))
    x_label = raw["x_label"].strip()
    liger_version = raw["liger_version"].strip()
    if liger_version and not LIGER_VERSION.match(liger_version):
        raise LigerFormatError(
            f"{liger_version!r} is not a release's version (such as 0.2.1)", line=line, column="liger_version"
        )

    workload = _cached(
        specs,
        ("workload", kernel, config_text, x_name, x_raw, x_label),
        lambda: _workload(kernel, config, dtype, x_name, x_raw, x_label),
    )
    environment = _cached(
        specs,
        ("environment", gpu_name),
        lambda: environment_fields(environment_spec(gpu_name), slug=slugify(gpu_name)),
    )
    protocol = _cached(specs, ("protocol", metric), lambda: _protocol(metric))
    implementation = _cached(
        specs,
        ("implementation", kernel, provider, liger_version, config_text),
        lambda: implementation_fields(implementation_spec(kernel, provider, liger_version, config)),
    )
    workload_digest = workload["digest"]
    comparison_key = _cached(
        specs,
        ("comparison", kernel, mode, metric, workload_digest, environment["product"]),
        lambda: digests.comparison_key(
            kernel=kernel,
            operation_mode=mode,
            metric=metric,
            workload_digest=workload_digest,
            family=protocol["comparability_family"],
            gpu=environment["product"],
        ),
    )
    external_id = _external_id(kernel, mode, metric, provider, environment, workload, observed_at)
    run = _run_fields(raw, variant, liger_version, mode, metric, unit, (y20, y50, y80), observed_at)
    run.update(external_id=external_id, comparison_key=comparison_key)
    row = LigerRow(
        line=line,
        kernel=_cached(specs, ("kernel", kernel), lambda: _kernel(kernel)),
        implementation=implementation,
        workload=workload,
        protocol=protocol,
        environment=environment,
        run=run,
        shared=specs,
    )
    if manifest:
        row.manifest_make()
    return row


# A manifest's members that differ from run to run, each serialised on its own; everything else in
# it (kernel, pass, metric, protocol, environment, source) is shared by the runs of one template.
_OWN = (
    ("metadata", "externalId"),
    ("metadata", "labels"),
    ("metadata", "observedAt"),
    ("spec", "comparisonKey"),
    ("spec", "implementation"),
    ("spec", "results"),
    ("spec", "workload"),
)
# In the template they stand as these strings: nothing else in it can hold a NUL (the CSV cannot,
# and a config's own values are in the implementation and workload, which are members here).
_PLACEHOLDERS = {f"\x00{member}\x00": position for position, (_, member) in enumerate(_OWN)}
# The spec documents among them: few per file, so each is serialised once per file.
_SPEC_DOCUMENTS = {"implementation", "workload"}
# The run's fields that make the members above (and its upstream key, which the manifest does not
# hold): every other field of the run is the same in every manifest of one template.
_ROW_FIELDS = {
    "external_id",
    "labels",
    "observed_at",
    "comparison_key",
    "median",
    "p20",
    "p80",
    "source_metrics",
    "upstream_key",
}


def _template_key(row: "LigerRow") -> tuple:
    """What a manifest holds besides its own members (_OWN): its kernel, protocol and environment,
    and the run's fields other than `_ROW_FIELDS`. Manifests with the same key differ only in
    those members, so their canonical bytes share one template (_manifest_template)."""
    shared = tuple((name, value) for name, value in row.run.items() if name not in _ROW_FIELDS)
    return (
        row.kernel["slug"],
        row.protocol["digest"],
        row.environment["digest"],
        row.environment["slug"],
        shared,
    )


def _manifest_canonical(manifest: dict, specs: dict, key: tuple) -> tuple[bytes, bool]:
    """The manifest's canonical bytes, and whether they are also the C encoder's own text: its
    template (made once per file and `key`) with its own members' canonical bytes put in. RFC 8785
    orders an object's members by key alone, so a member's bytes do not depend on its neighbours;
    nor does being the C encoder's text, which holds of the whole where it holds of every part."""
    segments, order, template_plain = _cached(specs, ("template", key), lambda: _manifest_template(manifest))
    if segments is None:
        return digests.canonical_bytes_and_plain(manifest)
    run_item = manifest["items"][0]
    own = [_member_canonical(member, run_item[section][member], specs) for section, member in _OWN]
    pieces = [segments[0]]
    for position, segment in zip(order, segments[1:], strict=True):
        pieces += (own[position][0], segment)
    return b"".join(pieces), template_plain and all(plain for _, plain in own)


def _member_canonical(member: str, value, specs: dict) -> tuple[bytes, bool]:
    if member in _SPEC_DOCUMENTS:
        key = ("canonical", member, value["digest"])
    elif member == "labels":  # a release's version (and suite): a few per file
        key = ("canonical", member, *value.items())
    else:
        return digests.canonical_bytes_and_plain(value)
    return _cached(specs, key, lambda: digests.canonical_bytes_and_plain(value))


def _manifest_template(manifest: dict) -> tuple[list[bytes] | None, list[int], bool]:
    """The canonical bytes of `manifest` with its own members (_OWN) left out: the segments
    between them, which member follows each segment, and whether the segments are the C encoder's
    own text; (None, [], False), so that each manifest is serialised whole, should a placeholder
    be found elsewhere than in its member's place."""
    run_item = dict(manifest["items"][0])
    for placeholder, position in _PLACEHOLDERS.items():
        section, member = _OWN[position]
        run_item[section] = {**run_item[section], member: placeholder}
    canonical, plain = digests.canonical_bytes_and_plain(
        {**manifest, "items": [run_item, *manifest["items"][1:]]}
    )
    tokens = {
        json.dumps(placeholder).encode("ascii"): position for placeholder, position in _PLACEHOLDERS.items()
    }
    if any(canonical.count(token) != 1 for token in tokens):
        return None, [], False
    pieces = re.split(b"(" + b"|".join(map(re.escape, tokens)) + b")", canonical)
    return pieces[::2], [tokens[token] for token in pieces[1::2]], plain


def _cached(specs: dict, key: tuple, build):
    try:
        return specs[key]
    except KeyError:
        value = specs[key] = build()
        return value


def _config_and_dtype(text: str, line: int) -> tuple[dict, str]:
    config = _config(text, line)
    return config, _dtype(config, line)


def _kernel(kernel: str) -> dict:
    return {"slug": kernel, "name": catalog.KERNEL_NAMES.get(kernel, kernel.replace("_", " ").capitalize())}


def _workload(kernel, config, dtype, x_name, x_raw, x_label) -> dict:
    x_value = _x_value(x_raw)
    parameters = {k: v for k, v in config.items() if k != "dtype"}
    parameters[x_name] = x_value if x_value is not None else x_raw
    spec = {
        "kernel": kernel,
        "parameters": parameters,
        "dtype": dtype or None,
        "sweep": {"name": x_name, "label": x_label},
        "tensors": catalog.tensors_for(kernel, parameters, dtype),
    }
    slug = _workload_slug(parameters, dtype)
    if x_value is None and _numeric_parameters(parameters):
        slug = _named_sweep_slug(slug, x_raw)
    return {
        "parameters": parameters,
        "tensors": spec["tensors"],
        "dtype": dtype,
        "x_name": x_name,
        "x_label": x_label,
        "x_value": x_value,
        "slug": slug,
        "summary": _workload_summary(parameters, x_name, dtype),
        "reference_asserted": False,
        "spec": spec,
        "digest": _spec_digest(spec),
    }


def environment_fields(spec: dict, *, slug: str) -> dict:
    """An Environment row's fields from its spec document (the manifest's environment)."""
    return {
        "slug": slug,
        "vendor": spec["vendor"],
        "product": spec["product"],
        "form_factor": spec["formFactor"],
        "architecture": spec["architecture"],
        "software": spec["software"],
        "spec": spec,
        "digest": _spec_digest(spec),
    }


def _protocol(metric: str) -> dict:
    spec = PROTOCOLS[metric]
    return {**digests.protocol_row(spec, slug=slugify(spec["name"])), "digest": _spec_digest(spec)}


def implementation_fields(spec: dict) -> dict:
    """An Implementation row's fields from its spec document (the manifest's implementation)."""
    return {
        "provider": spec["provider"],
        "project": spec["project"],
        "project_url": spec["projectUrl"],
        "revision": spec["revision"],
        "description": spec["description"],
        "spec": spec,
        "digest": _spec_digest(spec),
    }


@lru_cache(maxsize=4096)
def _digest_of_json(text: str) -> str:
    return digests.digest(json.loads(text))


def _spec_digest(spec: dict) -> str:
    # Specs repeat across thousands of rows; hash each distinct one once.
    return _digest_of_json(json.dumps(spec, sort_keys=True))


_TIMESTAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)", re.ASCII)


def _timestamp(value: str, line: int) -> datetime:
    try:
        if match := _TIMESTAMP.fullmatch(value):  # what strptime would read, without its cost
            return datetime(*map(int, match.groups()), tzinfo=UTC)
        return datetime.strptime(value, TIMESTAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise LigerFormatError(
            f"{value!r} is not a timestamp of the form YYYY-MM-DD HH:MM:SS", line=line, column="timestamp"
        ) from None


def _x_value(value: str) -> int | float | None:
    """A number where the sweep is numeric; None where it names something (e.g. a model)."""
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() else number


def _config(value: str, line: int) -> dict:
    if not value.strip():
        return {}
    try:
        config = json.loads(value)
    except json.JSONDecodeError as exc:
        raise LigerFormatError(
            f"invalid JSON ({exc.msg} at character {exc.pos})", line=line, column="extra_benchmark_config_str"
        ) from None
    if not isinstance(config, dict):
        raise LigerFormatError("expected a JSON object", line=line, column="extra_benchmark_config_str")
    for key, item in config.items():
        if not _canonical_number(item):
            raise LigerFormatError(
                f"{key!r} is {item!r}: numbers must be finite and integers within ±(2**53 - 1), "
                "as canonical JSON (RFC 8785) requires",
                line=line,
                column="extra_benchmark_config_str",
            )
    return config


def _canonical_number(value) -> bool:
    if isinstance(value, dict):
        return all(map(_canonical_number, value.values()))
    if isinstance(value, list):
        return all(map(_canonical_number, value))
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) <= MAX_SAFE_INTEGER
    return True


def _dtype(config: dict, line: int) -> str:
    for key, value in config.items():
        if isinstance(value, str) and value.startswith("torch.") and value not in catalog.DTYPES:
            raise LigerFormatError(
                f"unknown dtype {value!r} in {key!r}", line=line, column="extra_benchmark_config_str"
            )
    value = config.get("dtype")
    if value is None:
        return ""
    if value not in catalog.DTYPES:
        raise LigerFormatError(f"unknown dtype {value!r}", line=line, column="extra_benchmark_config_str")
    return catalog.DTYPES[value]


def _numeric_parameters(parameters: dict) -> list[tuple[str, int | float]]:
    named = {}
    for name, value in parameters.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        alias = catalog.PARAMETER_ALIASES.get(name, re.sub(r"[^0-9a-zA-Z_]", "", name).lower())
        named[alias if alias not in named else name.lower()] = value
    return sorted(named.items())


def _format(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _workload_slug(parameters: dict, dtype: str) -> str:
    parts = [f"{name}{_format(value)}" for name, value in _numeric_parameters(parameters)]
    if not parts:  # a sweep over names: the name itself identifies the workload
        parts = [slugify(str(v)) for v in parameters.values() if isinstance(v, str)]
    return "-".join(parts + ([dtype] if dtype else [])) or "default"


def _named_sweep_slug(slug: str, x_raw: str) -> str:
    """A sweep over names (e.g. model_config llama_2_7b) beside numeric parameters: the name
    goes first, or every point of the sweep would get the same slug."""
    return f"{slugify(x_raw)}-{slug}"


def _workload_summary(parameters: dict, x_name: str, dtype: str) -> str:
    x_alias = catalog.PARAMETER_ALIASES.get(x_name, x_name)
    numeric = _numeric_parameters(parameters)
    ordered = [p for p in numeric if p[0] == x_alias] + [p for p in numeric if p[0] != x_alias]
    parts = [f"{name} {_format(value)}" for name, value in ordered]
    if x_alias not in dict(numeric):
        parts.insert(0, f"{x_name} {parameters.get(x_name)}")
    return ", ".join(parts + ([dtype] if dtype else []))


def environment_spec(gpu_name: str, *, software: dict | None = None) -> dict:
    """A GPU's environment as Liger's catalog knows it (digests.environment_spec)."""
    return digests.environment_spec(gpu_name, catalog.GPUS, software=software)


def implementation_spec(kernel: str, provider: str, liger_version: str, config: dict) -> dict:
    """Who wrote a provider's implementation of a kernel; shared with the controlled runs."""
    project, url = catalog.PROJECTS.get(
        provider,
        ("Liger-Kernel", catalog.LIGER_REPOSITORY) if provider.startswith("liger") else (provider, ""),
    )
    revision = liger_version if project == "Liger-Kernel" else ""
    description = f"{project} implementation of {catalog.KERNEL_NAMES.get(kernel, kernel)}"
    if provider == "huggingface" and kernel in {"geglu", "swiglu"}:
        description = f"LlamaMLP with {config.get('hidden_act', 'its default activation')}"
    return {
        "kernel": kernel,
        "provider": provider,
        "project": project,
        "projectUrl": url,
        "revision": revision,
        "description": description,
    }
